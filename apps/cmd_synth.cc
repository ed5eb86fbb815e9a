// goose synth: write a random-weight Llama-family model of a chosen shape, or (--inflate) a
// real small model inflated to a realistic cost (synth/inflate.h).
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "synth/inflate.h"
#include "synth/synth.h"

namespace goose::cli {

std::string InflateShapeNames() {
  std::string out;
  for (const std::string& s : InflateShapes()) out += (out.empty() ? "" : ", ") + s;
  return out + ", keep";
}

namespace {

template <typename Flags>
int RunInflate(const Flags& f, const CLI::App& app) {
  for (const char* flag : {"--arch", "--hidden", "--layers", "--heads", "--kv-heads", "--ffn",
                           "--vocab-size", "--vocab-from"}) {
    if (app.count(flag) > 0) {
      return Fail(std::string(flag) + " does not apply to --inflate (the shape is --like)");
    }
  }
  InflateParams p;
  p.source = f.inflate;
  if (!f.like.empty()) p.shape = f.like;
  p.drop_layers = f.drop_layers;
  p.seed = f.p.seed;
  if (app.count("--ctx") > 0) p.n_ctx = f.p.context_length;
  const std::string dtype = f.dtype.empty() ? "q8_0" : f.dtype;
  if (!ParseDType(dtype, &p.dtype)) return Fail("unknown --dtype '" + dtype + "'");
  std::fprintf(stderr, "goose: inflating %s to the %s shape (%s) ...\n", p.source.c_str(),
               p.shape.c_str(), dtype.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = InflateModel(p, f.out); !st.ok()) return Fail(st.message());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "goose: wrote %s in %.1f s\n", f.out.c_str(), s);
  return 0;
}

}  // namespace

Runner AddSynthCommand(CLI::App& app) {
  struct Flags {
    SynthParams p;
    std::string like, dtype, out, inflate;
    std::vector<int> drop_layers;
  };
  auto f = std::make_shared<Flags>();
  app.add_option("--like", f->like,
                 "preset shape: " + PresetNames() + "; with --inflate: " + InflateShapeNames() +
                     " (default small-0.5b)");
  app.add_option("--inflate", f->inflate,
                 "a small real llama GGUF (F32, e.g. ../shared/models/stories260K.gguf) to "
                 "inflate: the result writes its text at the cost of the --like shape");
  app.add_option("--drop-layers", f->drop_layers,
                 "with --inflate: remove these layers of the small model first (a weaker drafter)")
      ->delimiter(',')
      ->check(IntIn(0, INT32_MAX));
  app.add_option("--arch", f->p.arch, "llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3");
  app.add_option("--hidden", f->p.n_embd, "embedding width")->check(IntIn(1, 1 << 16));
  app.add_option("--layers", f->p.n_layer, "transformer blocks")->check(IntIn(1, 1024));
  app.add_option("--heads", f->p.n_head, "attention heads")->check(IntIn(1, 1024));
  app.add_option("--kv-heads", f->p.n_head_kv, "key/value heads")->check(IntIn(1, 1024));
  app.add_option("--ffn", f->p.n_ff, "feed-forward width")->check(IntIn(1, 1 << 18));
  app.add_option("--vocab-size", f->p.n_vocab, "pad the vocabulary to this many tokens")
      ->check(IntIn(0, 1 << 22));
  app.add_option("--vocab-from", f->p.vocab_from, "GGUF to copy the tokenizer from");
  app.add_option("--dtype", f->dtype,
                 "f32 | f16 | bf16 | q8_0 | q4_0 | q5_0 | q4_k | q5_k | q6_k (default f32; "
                 "q8_0 with --inflate)");
  app.add_option("--seed", f->p.seed, "weights seed");
  app.add_option("--ctx", f->p.context_length,
                 "context length written to the file (with --inflate: default the source's)")
      ->check(IntIn(1, 1 << 20));
  app.add_option("-o,--output", f->out, "output GGUF path")->required();
  return [f, &app] {
    if (!f->inflate.empty()) return RunInflate(*f, app);
    if (!f->drop_layers.empty()) return Fail("--drop-layers applies to --inflate only");
    if (f->like.empty() &&
        (f->p.n_embd == 0 || f->p.n_layer == 0 || f->p.n_head == 0 || f->p.n_ff == 0)) {
      return Fail("give a shape: --like NAME (" + PresetNames() +
                  "), or --hidden, --layers, --heads and --ffn");
    }
    SynthParams p = f->p;
    if (!f->like.empty()) {
      // Explicit shape flags given together with --like override the preset.
      SynthParams preset = p;
      Status st = ApplyPreset(f->like, &preset);
      if (!st.ok()) return Fail(st.message());
      const SynthParams& given = f->p;
      if (given.n_embd) preset.n_embd = given.n_embd;
      if (given.n_layer) preset.n_layer = given.n_layer;
      if (given.n_head) preset.n_head = given.n_head;
      if (given.n_head_kv) preset.n_head_kv = given.n_head_kv;
      if (given.n_ff) preset.n_ff = given.n_ff;
      if (given.n_vocab) preset.n_vocab = given.n_vocab;
      p = preset;
    }
    const std::string dtype = f->dtype.empty() ? "f32" : f->dtype;
    if (!ParseDType(dtype, &p.dtype)) return Fail("unknown --dtype '" + dtype + "'");
    if (p.n_head_kv == 0) p.n_head_kv = p.n_head;
    if (p.vocab_from.empty()) p.vocab_from = DefaultModelPath();
    const auto t0 = std::chrono::steady_clock::now();
    Status st = SynthesizeModel(p, f->out);
    if (!st.ok()) return Fail(st.message());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr,
                 "goose: wrote %s (%s, %d layers, hidden %d) in %.1f s; its weights are random, "
                 "so it writes noise: it is for measuring speed (for a model that writes text "
                 "at a realistic cost, use --inflate)\n",
                 f->out.c_str(), p.arch.c_str(), p.n_layer, p.n_embd, s);
    return 0;
  };
}

}  // namespace goose::cli
