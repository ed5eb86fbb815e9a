// fuzz_make_seeds OUT_DIR: writes the generated part of the fuzz corpora, OUT_DIR/<target>/...,
// from goose itself and from ../shared (which must not be copied into the repository, so the
// corpora are built at run time by tools/run-fuzz.sh):
// - gguf_model: small vocab-only GGUFs cut from every shared vocabulary (all metadata, the first
//   tokens and merges), and tiny synthesized models (llama and qwen2, several dtypes, tied and
//   untied output) whose vocabularies are such cuts;
// - tokenizer: every llama.cpp tokenizer test input (../shared/vocab/*.inp), one file each;
// - transition_table: saved tables (bigram and unigram-only, a few sizes) with harvested rows;
// - cost_cache: a cost cache goose wrote for the tiny model (tiny calibration options);
// - chat_template: the chat template of every shared vocabulary that has one, with messages.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "budget/cost_cache.h"
#include "draft/transition_table.h"
#include "fuzz_util.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "synth/synth.h"

namespace fs = std::filesystem;

namespace goose::fuzz {
namespace {

void Die(const std::string& what) {
  std::fprintf(stderr, "fuzz_make_seeds: %s\n", what.c_str());
  std::exit(1);
}

void Must(const Status& st) {
  if (!st.ok()) Die(st.message());
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) Die("cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
  if (!out) Die("cannot write " + p.string());
}

// The vocabulary of `src` cut to its first `n_tokens` tokens and `n_merges` merges, all other
// metadata as is; special ids past the cut are dropped.
std::string CutVocab(const GgufFile& src, size_t n_tokens, size_t n_merges) {
  GgufWriter w;
  for (const auto& [key, v] : src.metadata()) {
    GgufValue c = v;
    const bool per_token = key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" ||
                           key == "tokenizer.ggml.token_type";
    const size_t keep = per_token ? n_tokens : key == "tokenizer.ggml.merges" ? n_merges : 0;
    if (keep > 0 && c.type == GgufType::kArray && c.size() > keep) {
      if (c.elem_type == GgufType::kString) {
        c.strings.resize(keep);
      } else if (c.elem_type != GgufType::kArray) {
        c.packed.resize(keep * GgufScalarBytes(c.elem_type));
      }
    }
    if (key.size() > 9 && key.compare(key.size() - 9, 9, "_token_id") == 0 &&
        c.AsInt() >= static_cast<int64_t>(n_tokens)) {
      continue;
    }
    w.Set(key, std::move(c));
  }
  return w.Serialize();
}

void GgufSeeds(const fs::path& shared, const fs::path& out, const fs::path& tmp) {
  const fs::path dir = out / "gguf_model";
  fs::create_directories(dir);
  std::vector<fs::path> vocabs;
  for (const auto& e : fs::directory_iterator(shared / "vocab")) {
    if (e.path().extension() == ".gguf") vocabs.push_back(e.path());
  }
  vocabs.push_back(shared / "models" / "stories260K.gguf");
  std::sort(vocabs.begin(), vocabs.end());
  std::vector<fs::path> cuts;
  for (const fs::path& v : vocabs) {
    auto g = GgufFile::Open(v.string());
    Must(g.status());
    // SPM vocabularies start with 3 specials and 256 byte tokens; byte-level BPE ones with the
    // 256-symbol byte alphabet: keep those and a few words.
    const std::string cut = CutVocab(**g, 300, 120);
    const fs::path p = dir / ("vocab-" + v.stem().string());
    WriteAll(p, cut);
    cuts.push_back(p);
  }
  struct ModelSeed {
    const char* name;
    const char* arch;
    DType dtype;
    bool tied;
    int vocab;  // index into cuts
  };
  // cuts are sorted by name: pick an SPM and a BPE one by name.
  auto find = [&](const std::string& stem) {
    for (size_t i = 0; i < cuts.size(); ++i) {
      if (cuts[i].filename() == "vocab-" + stem) return static_cast<int>(i);
    }
    Die("no vocabulary " + stem);
    return -1;
  };
  const ModelSeed models[] = {
      {"llama-f32-tied", "llama", DType::kF32, true, find("stories260K")},
      {"llama-q8_0", "llama", DType::kQ8_0, false, find("ggml-vocab-llama-spm")},
      {"llama-q4_0", "llama", DType::kQ4_0, true, find("ggml-vocab-phi-3")},
      {"qwen2-f16", "qwen2", DType::kF16, false, find("ggml-vocab-gpt-2")},
      {"qwen2-q5_0", "qwen2", DType::kQ5_0, true, find("ggml-vocab-deepseek-coder")},
      {"llama-bf16", "llama", DType::kBF16, false, find("ggml-vocab-falcon")},
  };
  for (const ModelSeed& m : models) {
    SynthParams p;
    p.arch = m.arch;
    p.n_embd = 32;
    p.n_layer = 1;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.n_ff = 64;
    p.dtype = m.dtype;
    p.tied_output = m.tied;
    p.context_length = 64;
    p.vocab_from = cuts[m.vocab].string();
    const fs::path path = tmp / (std::string(m.name) + ".gguf");
    Must(SynthesizeModel(p, path.string()));
    fs::copy_file(path, dir / (std::string("model-") + m.name),
                  fs::copy_options::overwrite_existing);
  }
}

void TokenizerSeeds(const fs::path& shared, const fs::path& out) {
  const fs::path dir = out / "tokenizer";
  fs::create_directories(dir);
  std::set<std::string> texts;
  for (const auto& e : fs::directory_iterator(shared / "vocab")) {
    if (e.path().extension() != ".inp") continue;
    // llama.cpp's format (shared/vocab/SOURCES.md): inputs separated by this line.
    const std::string inp = ReadAll(e.path());
    static const std::string kSep = "\n__ggml_vocab_test__\n";
    for (size_t pos = 0; pos < inp.size();) {
      const size_t hit = inp.find(kSep, pos);
      const size_t end = hit == std::string::npos ? inp.size() : hit;
      texts.insert(inp.substr(pos, end - pos));
      if (hit == std::string::npos) break;
      pos = hit + kSep.size();
    }
  }
  int i = 0;
  for (const std::string& t : texts) {
    if (!t.empty()) WriteAll(dir / ("inp-" + std::to_string(i++)), t);
  }
}

void TableSeeds(const fs::path& out, const fs::path& tmp) {
  const fs::path dir = out / "transition_table";
  fs::create_directories(dir);
  struct Shape {
    int n_vocab, k, log2_slots;
    bool bigram;
    uint64_t fingerprint;
  };
  const Shape shapes[] = {
      {16, 4, 2, true, 0}, {8, 2, 0, false, 0x1234}, {32, 10, 6, true, 7}, {5, 3, 1, true, 0}};
  int i = 0;
  for (const Shape& s : shapes) {
    TransitionTable t(s.n_vocab, s.k, s.log2_slots, s.bigram, s.fingerprint);
    std::vector<float> logits(s.n_vocab);
    std::vector<int32_t> ids(s.k);
    std::vector<float> scores(s.k);
    for (int32_t tok = 0; tok < s.n_vocab; tok += 2) {
      for (int v = 0; v < s.n_vocab; ++v) logits[v] = static_cast<float>((v * 31 + tok * 17) % 11);
      TopK(logits.data(), s.n_vocab, s.k, ids.data(), scores.data());
      t.Harvest(tok % 3 == 0 ? -1 : (tok + 1) % s.n_vocab, tok, ids, scores);
    }
    const fs::path p = tmp / ("table-" + std::to_string(i));
    Must(t.Save(p.string()));
    fs::copy_file(p, dir / ("table-" + std::to_string(i++)), fs::copy_options::overwrite_existing);
  }
}

void CostCacheSeeds(const fs::path& shared, const fs::path& out, const fs::path& tmp) {
  const fs::path dir = out / "cost_cache";
  fs::create_directories(dir);
  const fs::path cache = tmp / "xdg";
  setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  const std::string model_path = (shared / "models" / "stories260K.gguf").string();
  auto model = Model::Load(model_path);
  Must(model.status());
  ThreadPool pool(1);
  VerifyCostOptions o;
  o.nodes = {1, 2, 4, 8, 16};
  o.prefix = 8;
  o.reps = 1;
  auto cal = LoadOrMeasureCost(**model, model_path, &pool, /*recalibrate=*/true, &o);
  Must(cal.status());
  fs::copy_file(cal->cache_path, dir / "goose-written", fs::copy_options::overwrite_existing);
}

// Every shared vocabulary's tokenizer.chat_template (the real templates people meet), each with a
// short conversation in chat_template_fuzz.cc's format.
void ChatTemplateSeeds(const fs::path& shared, const fs::path& out) {
  const fs::path dir = out / "chat_template";
  fs::create_directories(dir);
  static const std::string kChat =
      "\x1esystem\x1fYou are terse.\x1euser\x1fHello\x1e"
      "assistant\x1f Hi. \x1euser\x1fTell me a story";
  for (const auto& e : fs::directory_iterator(shared / "vocab")) {
    if (e.path().extension() != ".gguf") continue;
    auto gguf = GgufFile::Open(e.path().string());
    Must(gguf.status());
    if (auto jinja = (*gguf)->GetString("tokenizer.chat_template")) {
      WriteAll(dir / ("template-" + e.path().stem().string()), *jinja + kChat);
    }
  }
}

}  // namespace
}  // namespace goose::fuzz

int main(int argc, char** argv) {
  using namespace goose::fuzz;
  if (argc != 2) Die("usage: fuzz_make_seeds OUT_DIR");
  const fs::path out = argv[1];
  const fs::path shared = SharedDir();
  const fs::path tmp = out / ".tmp";
  fs::create_directories(tmp);
  GgufSeeds(shared, out, tmp);
  TokenizerSeeds(shared, out);
  TableSeeds(out, tmp);
  CostCacheSeeds(shared, out, tmp);
  ChatTemplateSeeds(shared, out);
  fs::remove_all(tmp);
  std::printf("fuzz seeds written under %s\n", out.c_str());
  return 0;
}
