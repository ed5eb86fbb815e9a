#include "server/generation.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <new>

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

// The generation proper; throws only what the engine or an allocation throws.
void Generate(Engine& engine, const GenerationJob& job, GenerationChannel& channel,
              const std::function<bool()>& cancelled, GenerationOutcome* out) {
  const Tokenizer& tok = engine.model().tokenizer();
  TextStream text(tok, job.stop);
  int n_counted = 0;
  auto on_tokens = [&](std::span<const int32_t> tokens) {
    std::string piece;
    for (int32_t t : tokens) {
      ++n_counted;
      piece += text.Push(t);
      if (text.stopped()) break;
    }
    channel.Append(piece);
    return !text.stopped() && !cancelled();
  };
  const SpecParams& spec = job.params.spec;
  const std::vector<int64_t> chosen_before =
      spec.auto_budget ? engine.ChosenBudgets(spec) : std::vector<int64_t>{};
  StatusOr<GenerateResult> r = engine.Generate(job.prompt, job.params, on_tokens);
  if (!r.ok()) {
    out->status = r.status();
    return;
  }
  out->result = std::move(r).value();
  if (spec.auto_budget) {  // the engine counts per variant since its start: this request's part
    out->budgets_chosen = engine.ChosenBudgets(spec);
    for (size_t b = 0; b < chosen_before.size() && b < out->budgets_chosen.size(); ++b) {
      out->budgets_chosen[b] -= chosen_before[b];
    }
  }
  channel.Append(text.Finish());
  out->n_generated = n_counted;
  const GenerateParams& p = job.params;
  const std::vector<int32_t>& toks = out->result.tokens;
  const bool stop_token =
      !toks.empty() && !p.ignore_eos &&
      (tok.IsEog(toks.back()) ||
       std::find(p.stop_tokens.begin(), p.stop_tokens.end(), toks.back()) != p.stop_tokens.end());
  out->cancelled = !text.stopped() && !stop_token && cancelled() && n_counted < p.n_predict &&
                   !out->result.hit_context_limit;
  out->finish_reason = text.stopped() || stop_token ? "stop" : "length";
}

}  // namespace

void RunGeneration(Engine& engine, const GenerationJob& job, GenerationChannel& channel,
                   const std::atomic<bool>& cancel_all, int slot) {
  GenerationOutcome out;
  out.slot = slot;
  out.n_prompt = static_cast<int>(job.prompt.size());
  const std::function<bool()> cancelled = [&] { return channel.cancelled() || cancel_all.load(); };
  if (cancelled()) {  // the client left (or the server began stopping) while the job was queued
    out.cancelled = true;
  } else {
    try {
      Generate(engine, job, channel, cancelled, &out);
    } catch (const std::bad_alloc&) {
      out.status = Status::Error("out of memory while generating");
    } catch (const std::exception& e) {
      out.status = Status::Error(std::string("generation failed: ") + e.what());
    }
  }
  channel.Finish(std::move(out));
}

}  // namespace goose::server
