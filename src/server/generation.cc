#include "server/generation.h"

#include <algorithm>
#include <functional>

#include "draft/prediction_matcher.h"
#include "server/text_stream.h"

namespace goose::server {

void GenerationChannel::Append(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ += text;
  }
  cv_.notify_all();
}

void GenerationChannel::Finish(GenerationOutcome outcome) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    outcome_ = std::move(outcome);
    done_ = true;
  }
  cv_.notify_all();
}

void GenerationChannel::WaitFor(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !pending_.empty(); });
}

void GenerationChannel::WaitDone() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
}

std::string GenerationChannel::Take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out.swap(pending_);
  return out;
}

bool GenerationChannel::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

const GenerationOutcome& GenerationChannel::outcome() const {
  std::lock_guard<std::mutex> lock(mu_);
  return outcome_;
}

namespace {

// What one request's callbacks share: its text so far and what the outcome needs.
struct RequestText {
  RequestText(const Tokenizer& tok, const GenerationJob& job) : tok(tok), text(tok, job.stop) {}
  const Tokenizer& tok;
  TextStream text;
  int n_counted = 0;  // tokens up to the one that completed a stop string
  std::atomic<int> slot{-1};
};

bool EndsOnStopToken(const Tokenizer& tok, const GenerateParams& p,
                     const std::vector<int32_t>& toks) {
  return !toks.empty() && !p.ignore_eos &&
         (tok.IsEog(toks.back()) || std::find(p.stop_tokens.begin(), p.stop_tokens.end(),
                                              toks.back()) != p.stop_tokens.end());
}

GenerationOutcome Outcome(RequestText& rt, const GenerationJob& job, int slot,
                          StatusOr<GenerateResult> result, bool cancelled) {
  GenerationOutcome out;
  out.slot = slot;
  out.n_prompt = static_cast<int>(job.prompt.size());
  if (!result.ok()) {
    out.status = result.status();
    return out;
  }
  out.result = std::move(result).value();
  out.budgets_chosen = out.result.budgets_chosen;
  out.n_generated = rt.n_counted;
  const GenerateParams& p = job.params;
  const bool stop_token = EndsOnStopToken(rt.tok, p, out.result.tokens);
  out.cancelled = !rt.text.stopped() && !stop_token && cancelled && rt.n_counted < p.n_predict &&
                  !out.result.hit_context_limit;
  out.finish_reason = rt.text.stopped() || stop_token ? "stop" : "length";
  if (job.has_prediction) {
    const std::vector<int32_t>& toks = out.result.tokens;
    const size_t n = std::min(toks.size(), static_cast<size_t>(std::max(out.n_generated, 0)));
    out.prediction_tokens = static_cast<int64_t>(p.prediction.size());
    out.prediction_accepted =
        ReproducedPredictionTokens(p.prediction, std::span<const int32_t>(toks.data(), n));
  }
  return out;
}

}  // namespace

ServingRequest ServingRequestFor(const GenerationJob& job,
                                 std::shared_ptr<GenerationChannel> channel, const Tokenizer& tok,
                                 const std::atomic<bool>& cancel_all,
                                 std::function<void(int slot)> on_cycle,
                                 std::function<void(const GenerationOutcome&)> on_finished) {
  auto rt = std::make_shared<RequestText>(tok, job);
  ServingRequest r;
  r.prompt = job.prompt;
  r.params = job.params;
  if (on_cycle) {
    r.params.on_cycle = [rt, on_cycle](const Proposal&, const AcceptResult&) {
      on_cycle(rt->slot.load());
    };
  }
  r.on_start = [rt](int slot) { rt->slot.store(slot); };
  auto cancelled = [channel, &cancel_all] { return channel->cancelled() || cancel_all.load(); };
  r.cancelled = cancelled;
  r.on_tokens = [rt, channel, cancelled](std::span<const int32_t> tokens) {
    std::string piece;
    for (int32_t t : tokens) {
      ++rt->n_counted;
      piece += rt->text.Push(t);
      if (rt->text.stopped()) break;
    }
    channel->Append(piece);
    return !rt->text.stopped() && !cancelled();
  };
  r.on_done = [rt, channel, job, on_finished](int slot, StatusOr<GenerateResult> result,
                                              bool was_cancelled) {
    if (result.ok()) channel->Append(rt->text.Finish());
    GenerationOutcome out = Outcome(*rt, job, slot, std::move(result), was_cancelled);
    if (on_finished) on_finished(out);
    channel->Finish(std::move(out));
  };
  return r;
}

}  // namespace goose::server
