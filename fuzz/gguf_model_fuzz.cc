// Fuzz target gguf_model: a GGUF file from bytes, then everything Model::Load does with it.
//
// Input: the whole file. Steps, each on what the previous one accepted:
// 1. GgufFile::FromBytes (header, metadata, tensor directory); every metadata value and tensor
//    is then read back through the public accessors, and each tensor's data must lie inside the
//    image with the byte size its dims and dtype give.
// 2. Tokenizer::FromGguf (tokenizer metadata of a model or vocab-only file): on success a few
//    fixed texts and the vocabulary's own first tokens are encoded (ids in range) and decoded
//    (streaming gives the same bytes).
// 3. Model::FromGguf: config, every tensor's name, shape and dtype, tile repacking, tokenizer.
// Properties: no crash, leak, sanitizer report or absurd allocation (libFuzzer's -rss_limit_mb /
// malloc limit); every error is one clean line (escaped file content) naming the file.
// run-fuzz flags: -max_len=131072
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace goose::fuzz {
namespace {

constexpr const char* kName = "fuzz.gguf";

void CheckError(const Status& st) {
  FUZZ_CHECK(!st.ok(), "expected an error");
  const std::string& m = st.message();
  FUZZ_CHECK(m.rfind(std::string(kName) + ": ", 0) == 0, "error does not name the file: %s",
             m.c_str());
  FUZZ_CHECK(IsOneCleanLine(m), "error is not one clean line: %s", m.c_str());
}

// Reads a value back the way loaders do; `sink` keeps the compiler from dropping the reads.
void TouchValue(const GgufValue& v, uint64_t* sink) {
  *sink +=
      static_cast<uint64_t>(v.AsInt()) + static_cast<uint64_t>(v.AsDouble() != 0) + v.str.size();
  if (v.type != GgufType::kArray) return;
  FUZZ_CHECK(v.size() == (v.elem_type == GgufType::kString ? v.strings.size()
                          : v.elem_type == GgufType::kArray
                              ? v.arrays.size()
                              : v.packed.size() / GgufScalarBytes(v.elem_type)),
             "array size");
  if (v.elem_type == GgufType::kArray) {
    for (const GgufValue& e : v.arrays) TouchValue(e, sink);
    return;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    const GgufValue e = v.At(i);
    FUZZ_CHECK(e.type == v.elem_type, "element type");
    TouchValue(e, sink);
  }
}

void CheckFile(const GgufFile& g, const uint8_t* data, size_t size) {
  uint64_t sink = 0;
  for (const auto& [key, v] : g.metadata()) {
    FUZZ_CHECK(g.Find(key) == &v, "Find(key) does not find its own entry");
    (void)g.GetInt(key);
    (void)g.GetFloat(key);
    (void)g.GetString(key);
    (void)g.GetArray(key);
    TouchValue(v, &sink);
  }
  FUZZ_CHECK(g.data_offset() % g.alignment() == 0, "data offset not aligned");
  for (const GgufTensorInfo& t : g.tensors()) {
    FUZZ_CHECK(g.FindTensor(t.name) == &t, "FindTensor does not find its own entry");
    FUZZ_CHECK(!t.dims.empty() && t.dims.size() <= 4, "n_dims");
    const DTypeInfo dt = GetDTypeInfo(static_cast<uint32_t>(t.dtype));
    FUZZ_CHECK(dt.block_size > 0 && t.dims[0] % dt.block_size == 0, "block size");
    FUZZ_CHECK(t.n_bytes == static_cast<uint64_t>(t.n_elements() / dt.block_size) * dt.block_bytes,
               "n_bytes");
    // Inside the image (FromBytes's copy of the input), and the input's bytes.
    FUZZ_CHECK(g.data_offset() <= size && t.offset <= size - g.data_offset() &&
                   t.n_bytes <= size - g.data_offset() - t.offset,
               "tensor past the end");
    if (t.n_bytes > 0) sink += t.data[0] + t.data[t.n_bytes - 1];
    FUZZ_CHECK(std::memcmp(t.data, data + g.data_offset() + t.offset, t.n_bytes) == 0,
               "tensor data does not match the file");
  }
  if (sink == 0x5eed) std::fprintf(stderr, " ");
}

void CheckTokenizer(const Tokenizer& tok) {
  const int32_t n = tok.n_vocab();
  FUZZ_CHECK(n > 0, "empty vocabulary");
  FUZZ_CHECK(tok.bos() >= -1 && tok.bos() < n && tok.eos() >= -1 && tok.eos() < n, "special ids");
  std::vector<std::string> texts = {"Hello world", " a  b\n\n\tc", "\xff\xfe\x00z", "",
                                    "\xe2\x96\x81\xc3\x84pfel \xf0\x9f\xa6\x99 123"};
  std::string first;  // the vocabulary's first tokens, concatenated
  for (int32_t id = 0; id < n && id < 24; ++id) first += tok.TokenToPiece(id);
  texts.push_back(first);
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok.Encode(text, /*add_bos=*/true);
    for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < n, "id %d outside the vocabulary", id);
    const std::string decoded = tok.Decode(ids);
    StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.Push(id);
    streamed += stream.Flush();
    FUZZ_CHECK(streamed == decoded, "streamed decode differs from Decode");
    (void)tok.IsEog(ids.empty() ? 0 : ids.back());
  }
}

}  // namespace
}  // namespace goose::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goose;
  using namespace goose::fuzz;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto gguf = GgufFile::FromBytes(bytes, kName);
  if (!gguf.ok()) {
    CheckError(gguf.status());
    return 0;
  }
  CheckFile(**gguf, data, size);

  auto tok = Tokenizer::FromGguf(**gguf);
  if (tok.ok()) {
    CheckTokenizer(**tok);
  } else {
    CheckError(tok.status());
  }

  auto model = Model::FromGguf(std::move(gguf).value());
  if (!model.ok()) {
    CheckError(model.status());
    return 0;
  }
  const Model& m = **model;
  const LlamaConfig& c = m.config();
  FUZZ_CHECK(m.tokenizer().n_vocab() == c.n_vocab, "tokenizer and config disagree");
  FUZZ_CHECK(m.token_embd().rows == c.n_vocab && m.token_embd().cols == c.n_embd, "token_embd");
  FUZZ_CHECK(m.output().rows == c.n_vocab && m.output().cols == c.n_embd, "output");
  FUZZ_CHECK(static_cast<int>(m.layers().size()) == c.n_layer, "layers");
  FUZZ_CHECK(c.n_rot <= c.head_dim && c.n_head % c.n_head_kv == 0, "config");
  return 0;
}
