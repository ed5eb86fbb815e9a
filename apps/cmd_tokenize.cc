// goose tokenize: the token ids of a text (-p, or -f FILE / -f - for stdin), with --pieces the
// piece each id stands for; --decode turns ids back into text.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "util/escape.h"

namespace goose::cli {
namespace {

struct TokenizeFlags {
  std::string model, prompt, file, decode;
  bool no_bos = false, json = false, pieces = false;
};

// "1,403,407" or "1 403 407" -> ids in [0, n_vocab).
Status ParseIds(const std::string& text, int n_vocab, std::vector<int32_t>* out) {
  std::string s = text;
  for (char& c : s) {
    if (c == ',') c = ' ';
  }
  std::istringstream in(s);
  std::string item;
  while (in >> item) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v >= n_vocab) {
      return Status::Error("--decode: '" + EscapeForMessage(item) + "' is not a token id in 0.." +
                           std::to_string(n_vocab - 1));
    }
    out->push_back(static_cast<int32_t>(v));
  }
  if (out->empty()) return Status::Error("--decode: no token ids given (e.g. --decode 1,403,407)");
  return Status::Ok();
}

int RunTokenize(const TokenizeFlags& f) {
  const int inputs = !f.prompt.empty() + !f.file.empty() + !f.decode.empty();
  if (inputs != 1) return Fail("give exactly one of -p TEXT, -f FILE (- = stdin), --decode IDS");
  const std::string path = ResolveModelPath(f.model);
  if (path.empty()) return 1;
  // Only the vocabulary is needed: open the GGUF without loading a model (works for
  // vocab-only files too).
  auto gguf = GgufFile::Open(path);
  if (!gguf.ok()) return Fail(gguf.status().message());
  auto tok_or = Tokenizer::FromGguf(**gguf);
  if (!tok_or.ok()) return Fail(tok_or.status().message());
  const Tokenizer& tok = **tok_or;
  if (!f.decode.empty()) {
    std::vector<int32_t> ids;
    if (Status st = ParseIds(f.decode, tok.n_vocab(), &ids); !st.ok()) return Fail(st.message());
    const std::string text = tok.Decode(ids);
    if (f.json) {
      std::printf("%s\n", nlohmann::json{{"text", text}}
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                              .c_str());
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  }
  std::string text = f.prompt;
  if (f.file == "-") {
    text = ReadStdin();
  } else if (!f.file.empty()) {
    std::ifstream in(f.file, std::ios::binary);
    if (!in) return Fail("cannot read -f '" + f.file + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const std::vector<int32_t> ids = tok.Encode(text, !f.no_bos);
  if (f.json) {
    nlohmann::json j = {{"tokens", ids}};
    if (f.pieces) {
      nlohmann::json p = nlohmann::json::array();
      for (int32_t id : ids) p.push_back(tok.TokenToPiece(id));
      j["pieces"] = std::move(p);
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (f.pieces) {  // one "id 'piece'" per line, the piece escaped so every byte shows
    for (int32_t id : ids)
      std::printf("%6d '%s'\n", id, EscapeForMessage(tok.TokenToPiece(id)).c_str());
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

Runner AddTokenizeCommand(CLI::App& app) {
  auto f = std::make_shared<TokenizeFlags>();
  app.add_option("-m,--model", f->model, "GGUF model or vocab file");
  app.add_option("-p,--prompt", f->prompt, "text to tokenize");
  app.add_option("-f,--file", f->file, "tokenize this file's text (- = stdin)");
  app.add_option("--decode", f->decode, "token ids to turn back into text, e.g. 1,403,407");
  app.add_flag("--pieces", f->pieces,
               "show each id's piece (one per line, or \"pieces\" in --json)");
  app.add_flag("--no-bos", f->no_bos, "do not prepend BOS");
  app.add_flag("--json", f->json, "print {\"tokens\": [...]} (or {\"text\": ...} with --decode)");
  return [f] { return RunTokenize(*f); };
}

}  // namespace goose::cli
