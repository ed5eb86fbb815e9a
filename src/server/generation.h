// One generation request in the serving loop (engine/serving_loop.h): its tokens go through
// TextStream (stop strings, UTF-8), and a GenerationChannel carries the text to the HTTP thread
// that answers.
//
// Contract
// - GenerationChannel is shared by the producer (the serving loop's thread, through the
//   ServingRequest that ServingRequestFor makes) and the consumer (the HTTP thread):
//   Append/Finish from the producer, Take/WaitFor from the consumer, Cancel() from the consumer
//   when its client went away. All thread-safe.
// - The request always ends with Finish(): a cancelled request (the channel's or the server-wide
//   flag) stops before the next pass and reports cancelled; an error reports its Status.
// - n_generated counts the tokens up to the one that completed a stop string (not the rest of
//   that speculative cycle), so usage does not depend on how many tokens a cycle accepted.
// - finish_reason: "stop" (a stop string, an end-of-generation token or a stop token), else
//   "length" (max_tokens or the context limit).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/serving_loop.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace goose::server {

struct GenerationJob {
  std::vector<int32_t> prompt;  // BOS included where the vocabulary uses one
  GenerateParams params;
  std::vector<std::string> stop;
  bool has_prediction = false;  // params.prediction was given (it may be empty)
};

struct GenerationOutcome {
  Status status;
  bool cancelled = false;
  int n_prompt = 0;
  int n_generated = 0;
  std::string finish_reason;  // "stop" or "length"
  // With a prediction: its tokens, and those the output reproduced (ReproducedPredictionTokens
  // over the counted tokens); -1 / 0 without one.
  int64_t prediction_tokens = -1;
  int64_t prediction_accepted = 0;
  GenerateResult result;  // statistics and timings (tokens as the engine produced them)
  // --budget auto: the cycles this request ran at each budget ([B]), as the engine's chooser
  // picked them; empty otherwise, and for a method that sizes its own trees on the curve.
  std::vector<int64_t> budgets_chosen;
  int slot = -1;
};

class GenerationChannel {
 public:
  // Producer.
  void Append(const std::string& text);
  void Finish(GenerationOutcome outcome);
  bool cancelled() const { return cancelled_.load(); }
  // Consumer. WaitFor returns when text is pending, the generation finished, or the timeout
  // passed; Take() returns the pending text and clears it.
  void WaitFor(std::chrono::milliseconds timeout);
  void WaitDone();
  std::string Take();
  bool done() const;
  const GenerationOutcome& outcome() const;  // only after done()
  void Cancel() { cancelled_.store(true); }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string pending_;
  bool done_ = false;
  GenerationOutcome outcome_;
  std::atomic<bool> cancelled_{false};
};

// The serving loop's request for `job`, feeding `channel`. `cancel_all` is the server-wide stop;
// `on_cycle` (null: none) runs after every verified cycle with the request's slot; `on_finished`
// (null: none) gets the outcome just before the channel does. The referenced objects outlive
// the request.
ServingRequest ServingRequestFor(const GenerationJob& job,
                                 std::shared_ptr<GenerationChannel> channel, const Tokenizer& tok,
                                 const std::atomic<bool>& cancel_all,
                                 std::function<void(int slot)> on_cycle,
                                 std::function<void(const GenerationOutcome&)> on_finished);
}  // namespace goose::server
