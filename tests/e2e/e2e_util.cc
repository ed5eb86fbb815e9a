#include "e2e_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "synth/synth.h"

namespace goose {

namespace {

std::unique_ptr<Model> LoadOrDie(const std::string& path) {
  auto m = Model::Load(path);
  if (!m.ok()) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), m.status().message().c_str());
    std::abort();
  }
  return std::move(m).value();
}

std::vector<std::string> JsonlField(const std::string& path, const char* field, int n,
                                    bool first_turn) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (static_cast<int>(out.size()) < n && std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    out.push_back(first_turn ? j.at(field).at(0).get<std::string>()
                             : j.at(field).get<std::string>());
  }
  return out;
}

}  // namespace

std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("GOOSE_SHARED");
  const std::string dir = env != nullptr && *env != '\0' ? env : GOOSE_SHARED_DIR;
  return dir + "/" + rel;
}

const Model& TinyModel() {
  static const std::unique_ptr<Model> model = LoadOrDie(SharedPath("models/stories260K.gguf"));
  return *model;
}

namespace {

// The synthesized qwen2 model of SynthQwen2Model() with `dtype` matrices, written into a temp
// dir of this process and loaded (the mapping stays valid after the file is gone).
std::unique_ptr<Model> SynthQwen2(DType dtype) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("goose_e2e_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  SynthParams p;
  p.arch = "qwen2";
  p.n_embd = 64;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.n_ff = 128;
  p.dtype = dtype;
  p.seed = 7;
  p.vocab_from = SharedPath("models/stories260K.gguf");
  const std::string path = dir + "/qwen2_" + std::string(GetDTypeInfo(dtype).name) + ".gguf";
  Status st = SynthesizeModel(p, path);
  if (!st.ok()) {
    std::fprintf(stderr, "synth failed: %s\n", st.message().c_str());
    std::abort();
  }
  auto m = LoadOrDie(path);
  std::filesystem::remove_all(dir);
  return m;
}

}  // namespace

const Model& SynthQwen2Model() {
  static const std::unique_ptr<Model> model = SynthQwen2(DType::kQ8_0);
  return *model;
}

const Model& SynthQwen2Twin() {
  static const std::unique_ptr<Model> model = SynthQwen2(DType::kQ4_0);
  return *model;
}

std::vector<std::vector<int32_t>> LosslessPrompts(const Model& model, int max_tokens) {
  const Tokenizer& tok = model.tokenizer();
  std::vector<std::vector<int32_t>> prompts;
  auto add = [&](const std::string& text, int cap) {
    std::vector<int32_t> ids = tok.Encode(text, true);
    if (static_cast<int>(ids.size()) > cap) ids.resize(cap);
    prompts.push_back(ids);
  };
  for (const std::string& s :
       JsonlField(SharedPath("data/tinystories/validation.jsonl"), "text", 8, false)) {
    add(s, std::min(49, max_tokens));  // convention 14: BOS + first 48 tokens
  }
  for (const std::string& s :
       JsonlField(SharedPath("data/spec_bench/question.jsonl"), "turns", 8, true)) {
    add(s, max_tokens);
  }
  add("I like cake. I like cake. I like cake. I like cake. I like cake.", max_tokens);
  add("one, two, three, four, one, two, three, four, one, two, three,", max_tokens);
  add("The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog",
      max_tokens);
  add("Lily said, \"Let's play!\" Tom said, \"Let's play!\" Mom said, \"Let's", max_tokens);
  return prompts;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunResult RunGoose(const std::string& args, const std::string& shell_prefix,
                   const std::string& binary) {
  static int calls = 0;
  const std::string base =
      (std::filesystem::temp_directory_path() /
       ("goose_e2e_" + std::to_string(getpid()) + "_" + std::to_string(calls++)))
          .string();
  const std::string cmd =
      shell_prefix + "'" + binary + "' " + args + " >" + base + ".out 2>" + base + ".err";
  const int status = std::system(cmd.c_str());
  RunResult r;
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = ReadAll(base + ".out");
  r.err = ReadAll(base + ".err");
  std::filesystem::remove(base + ".out");
  std::filesystem::remove(base + ".err");
  return r;
}

const std::vector<int32_t>& PlainIds(const Model& model, const std::vector<int32_t>& prompt,
                                     const GenerateParams& base) {
  // Everything plain decoding's ids depend on (the seed and top-p too: tests of one process
  // that sample the same prompt with other seeds must not share a reference).
  using Key = std::tuple<const Model*, std::vector<int32_t>, float, int, float, uint64_t, int, bool,
                         std::vector<int32_t>>;
  static std::map<Key, std::vector<int32_t>> cache;
  const SamplingParams& s = base.sampling;
  const Key key{&model, prompt,         s.temp,          s.top_k,         s.top_p,
                s.seed, base.n_predict, base.ignore_eos, base.stop_tokens};
  auto it = cache.find(key);
  if (it == cache.end()) {
    ThreadPool pool(1);
    Engine plain(model, 512, &pool);
    GenerateParams p = base;
    p.spec = SpecParams{};
    auto r = plain.Generate(prompt, p);
    EXPECT_TRUE(r.ok()) << r.status().message();
    it = cache.emplace(key, r.ok() ? r->tokens : std::vector<int32_t>{}).first;
  }
  return it->second;
}

}  // namespace goose
