// goose synth: write a random-weight Llama-family model of a chosen shape.
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "synth/synth.h"

namespace goose::cli {

Runner AddSynthCommand(CLI::App& app) {
  struct Flags {
    SynthParams p;
    std::string like, dtype = "f32", out;
  };
  auto f = std::make_shared<Flags>();
  app.add_option("--like", f->like, "preset shape: " + PresetNames());
  app.add_option("--arch", f->p.arch, "llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3");
  app.add_option("--hidden", f->p.n_embd, "embedding width")->check(CLI::Range(1, 1 << 16));
  app.add_option("--layers", f->p.n_layer, "transformer blocks")->check(CLI::Range(1, 1024));
  app.add_option("--heads", f->p.n_head, "attention heads")->check(CLI::Range(1, 1024));
  app.add_option("--kv-heads", f->p.n_head_kv, "key/value heads")->check(CLI::Range(1, 1024));
  app.add_option("--ffn", f->p.n_ff, "feed-forward width")->check(CLI::Range(1, 1 << 18));
  app.add_option("--vocab-size", f->p.n_vocab, "pad the vocabulary to this many tokens")
      ->check(CLI::Range(0, 1 << 22));
  app.add_option("--vocab-from", f->p.vocab_from, "GGUF to copy the tokenizer from");
  app.add_option("--dtype", f->dtype, "f32 | f16 | bf16 | q8_0 | q4_0 | q5_0 | q4_k | q5_k | q6_k");
  app.add_option("--seed", f->p.seed, "weights seed");
  app.add_option("--ctx", f->p.context_length, "context length written to the file")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-o,--output", f->out, "output GGUF path")->required();
  return [f] {
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
    if (!ParseDType(f->dtype, &p.dtype)) return Fail("unknown --dtype '" + f->dtype + "'");
    if (p.n_head_kv == 0) p.n_head_kv = p.n_head;
    if (p.vocab_from.empty()) p.vocab_from = DefaultModelPath();
    const auto t0 = std::chrono::steady_clock::now();
    Status st = SynthesizeModel(p, f->out);
    if (!st.ok()) return Fail(st.message());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "goose: wrote %s (%s, %d layers, hidden %d) in %.1f s\n", f->out.c_str(),
                 p.arch.c_str(), p.n_layer, p.n_embd, s);
    return 0;
  };
}

}  // namespace goose::cli
