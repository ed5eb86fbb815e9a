// Model inflation: the inflated model writes the small model's text (at f32, and at q8_0 the
// text of the small model quantized the same way), costs like its shape, and bad input is one
// clear error.
#include "synth/inflate.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "ops/quant.h"
#include "sample/sampler.h"
#include "test_temp.h"

namespace goose {
namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& rel) {
  const char* env = std::getenv("GOOSE_SHARED");
  return std::string(env && *env ? env : GOOSE_SHARED_DIR) + "/" + rel;
}

std::string Temp(const std::string& name) { return ProcessTempPath("inflate_" + name); }

std::unique_ptr<Model> Inflate(const std::string& shape, DType dtype, std::vector<int> drop = {},
                               int n_ctx = 0) {
  InflateParams p;
  p.n_ctx = n_ctx;
  p.source = Shared("models/stories260K.gguf");
  p.shape = shape;
  p.dtype = dtype;
  p.drop_layers = std::move(drop);
  const std::string path = Temp(shape + "-" + std::string(GetDTypeInfo(dtype).name) + ".gguf");
  const Status st = InflateModel(p, path);
  EXPECT_TRUE(st.ok()) << st.message();
  auto m = Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().message();
  fs::remove(path);  // the mapping stays valid
  return m.ok() ? std::move(m).value() : nullptr;
}

// Greedy ids after `prompt`, one token per pass.
std::vector<int32_t> Greedy(const Model& m, const std::string& prompt, int n) {
  ThreadPool pool(1);
  Context ctx(m, 256, &pool);
  std::vector<int32_t> ids = m.tokenizer().Encode(prompt, true), out;
  EXPECT_TRUE(ctx.ForwardChain(ids).ok());
  ctx.KeepAll();
  const int n_vocab = m.config().n_vocab;
  const float* logits = ctx.logits(static_cast<int>(ids.size()) - 1);
  for (int i = 0; i < n; ++i) {
    const int32_t t = static_cast<int32_t>(Argmax(logits, n_vocab));
    out.push_back(t);
    EXPECT_TRUE(ctx.ForwardChain({&t, 1}).ok());
    ctx.KeepAll();
    logits = ctx.logits(0);
  }
  return out;
}

const char* kPrompts[] = {"Once upon a time", "Tom and Sam went to the park. Tom saw a big dog.",
                          "The little bird sang a"};

TEST(Inflate, F32WritesTheSmallModelsText) {
  auto small = Model::Load(Shared("models/stories260K.gguf"));
  ASSERT_TRUE(small.ok());
  auto big = Inflate("tiny-test", DType::kF32);
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->config().n_embd, 256);
  EXPECT_EQ(big->config().n_layer, 7);
  EXPECT_EQ(big->config().n_vocab, 1000);
  EXPECT_GT(big->weight_bytes(), 10 * (*small)->weight_bytes());
  for (const char* p : kPrompts) EXPECT_EQ(Greedy(*big, p, 48), Greedy(**small, p, 48)) << p;
}

// The context length is the source's (512) unless one is given (a long-prompt benchmark).
TEST(Inflate, ContextLengthIsTheSourcesUnlessGiven) {
  auto same = Inflate("keep", DType::kF32);
  auto longer = Inflate("tiny-test", DType::kF32, {}, 4096);
  ASSERT_NE(same, nullptr);
  ASSERT_NE(longer, nullptr);
  EXPECT_EQ(same->config().n_ctx_train, 512);
  EXPECT_EQ(longer->config().n_ctx_train, 4096);
}

// At q8_0 the small model's weights sit in whole blocks of 32 of the big rows (the small width
// is a multiple of 32), so every real block is the small model's own Q8_0 block (times an exact
// power of two for Wq). The text is then the quantized small model's up to activation rounding
// (mixed blocks of the hidden FFN units): not checked token for token.
TEST(Inflate, Q8KeepsTheSmallModelsQuantizedBlocks) {
  InflateParams p;
  p.source = Shared("models/stories260K.gguf");
  p.dtype = DType::kQ8_0;
  p.shape = "keep";
  const std::string small_path = Temp("keep-q8.gguf"), big_path = Temp("big-q8.gguf");
  ASSERT_TRUE(InflateModel(p, small_path).ok());
  p.shape = "tiny-test";
  ASSERT_TRUE(InflateModel(p, big_path).ok());
  auto small = GgufFile::Open(small_path);
  auto big = GgufFile::Open(big_path);
  ASSERT_TRUE(small.ok() && big.ok());
  auto rows = [](const GgufFile& f, const char* name, int64_t r, int64_t n) {
    const GgufTensorInfo* t = f.FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, DType::kQ8_0) << name;
    std::vector<float> out(t->dims[0]);
    DequantizeRow(t->dtype, t->data + r * RowBytes(t->dtype, t->dims[0]), t->dims[0], out.data());
    out.resize(n);
    return out;
  };
  const int64_t d = (*small)->FindTensor("token_embd.weight")->dims[0];
  for (int64_t r : {0, 7, 300, 511}) {
    EXPECT_EQ(rows(**big, "token_embd.weight", r, d), rows(**small, "token_embd.weight", r, d));
    EXPECT_EQ(rows(**big, "output.weight", r, d), rows(**small, "output.weight", r, d));
  }
  // Small head 0, dim 0 of layer 1's Wq: big row 0 (head 0, dim 0), scaled by sqrt(32 / 8) = 2.
  std::vector<float> q_small = rows(**small, "blk.1.attn_q.weight", 0, d);
  for (float& x : q_small) x *= 2;
  EXPECT_EQ(rows(**big, "blk.1.attn_q.weight", 0, d), q_small);
  EXPECT_EQ(rows(**big, "blk.2.ffn_up.weight", 5, d), rows(**small, "blk.2.ffn_up.weight", 5, d));
  fs::remove(small_path);
  fs::remove(big_path);
}

TEST(Inflate, DroppingALayerMakesAWeakerModelOfTheSameFamily) {
  auto small = Model::Load(Shared("models/stories260K.gguf"));
  ASSERT_TRUE(small.ok());
  auto weak = Inflate("keep", DType::kF32, {3});
  ASSERT_NE(weak, nullptr);
  EXPECT_EQ(weak->config().n_layer, (*small)->config().n_layer - 1);
  EXPECT_EQ(weak->tokenizer().n_vocab(), (*small)->tokenizer().n_vocab());
  int same = 0, total = 0;
  for (const char* p : kPrompts) {
    const auto a = Greedy(*weak, p, 32), b = Greedy(**small, p, 32);
    for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
    total += static_cast<int>(a.size());
  }
  EXPECT_LT(same, total) << "the weak model must differ";
  EXPECT_GT(same, 0);
}

TEST(Inflate, BadInputIsOneClearError) {
  InflateParams p;
  p.source = Shared("models/stories260K.gguf");
  const std::string out = Temp("bad.gguf");
  p.shape = "huge";
  Status st = InflateModel(p, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown shape 'huge'"), std::string::npos) << st.message();
  p.shape = "tiny-test";
  p.dtype = DType::kQ4_K;
  st = InflateModel(p, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("q4_k"), std::string::npos) << st.message();
  p.dtype = DType::kF32;
  p.drop_layers = {9};
  st = InflateModel(p, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("layer 9"), std::string::npos) << st.message();
  p.drop_layers = {};
  p.source = Shared("vocab/ggml-vocab-gpt-2.gguf");  // a vocabulary, not a llama model
  st = InflateModel(p, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ggml-vocab-gpt-2.gguf"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace goose
