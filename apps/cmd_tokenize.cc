// goose tokenize: print the token ids of a text.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace goose::cli {

Runner AddTokenizeCommand(CLI::App& app) {
  struct Flags {
    std::string model, prompt;
    bool no_bos = false, json = false;
  };
  auto f = std::make_shared<Flags>();
  app.add_option("-m,--model", f->model, "GGUF model or vocab file");
  app.add_option("-p,--prompt", f->prompt, "text to tokenize")->required();
  app.add_flag("--no-bos", f->no_bos, "do not prepend BOS");
  app.add_flag("--json", f->json, "print {\"tokens\": [...]}");
  return [f] {
    const std::string path = ResolveModelPath(f->model);
    if (path.empty()) return 1;
    // Only the vocabulary is needed: open the GGUF without loading a model (works for
    // vocab-only files too).
    auto gguf = GgufFile::Open(path);
    if (!gguf.ok()) return Fail(gguf.status().message());
    auto tok = Tokenizer::FromGguf(**gguf);
    if (!tok.ok()) return Fail(tok.status().message());
    const std::vector<int32_t> ids = (*tok)->Encode(f->prompt, !f->no_bos);
    if (f->json) {
      std::printf("%s\n", nlohmann::json{{"tokens", ids}}.dump().c_str());
    } else {
      for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
      std::printf("\n");
    }
    return 0;
  };
}

}  // namespace goose::cli
