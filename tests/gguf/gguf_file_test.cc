// Reads the real tiny llama GGUF and checks facts about it; writer round-trips.
#include "gguf/gguf_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "gguf/gguf_writer.h"
#include "test_temp.h"
#include "util/fp16.h"

namespace goose {
namespace {

std::string SharedDir() {
  if (const char* env = std::getenv("GOOSE_SHARED")) return env;
  return GOOSE_SHARED_DIR;
}
std::string TinyModel() { return SharedDir() + "/models/stories260K.gguf"; }

TEST(GgufFileTest, ReadsTinyLlama) {
  auto f = GgufFile::Open(TinyModel());
  ASSERT_TRUE(f.ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.GetString("general.architecture"), "llama");
  EXPECT_EQ(g.GetInt("llama.block_count"), 5);
  EXPECT_EQ(g.GetInt("llama.embedding_length"), 64);
  EXPECT_EQ(g.GetInt("llama.context_length"), 512);
  EXPECT_FALSE(g.GetInt("general.architecture").has_value());  // wrong type -> nullopt
  EXPECT_FALSE(g.GetString("no.such.key").has_value());
  const auto* tokens = g.GetArray("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ(tokens->strings[0], "<unk>");
  EXPECT_EQ(tokens->strings[1], "<s>");
  EXPECT_EQ(tokens->At(2).str, "</s>");
  const GgufValue* scores = g.GetArray("tokenizer.ggml.scores");
  ASSERT_NE(scores, nullptr);
  ASSERT_EQ(scores->size(), 512u);
  EXPECT_EQ(scores->packed.size(), 512u * 4);           // packed as in the file
  EXPECT_EQ(g.GetArray("llama.block_count"), nullptr);  // not an array
  EXPECT_EQ(g.Find("tokenizer.ggml.tokens")->elem_type, GgufType::kString);

  const GgufTensorInfo* emb = g.FindTensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->dtype, DType::kF32);
  EXPECT_EQ(emb->n_bytes, 64u * 512u * 4u);
  EXPECT_EQ(emb->n_elements(), 64 * 512);
  EXPECT_EQ(g.FindTensor("nope"), nullptr);
  // Every tensor lies inside the file and is aligned.
  uint64_t total = 0;
  for (const GgufTensorInfo& t : g.tensors()) {
    ASSERT_NE(t.data, nullptr) << t.name;
    EXPECT_EQ(t.offset % g.alignment(), 0u) << t.name;
    total += t.n_bytes;
  }
  EXPECT_GT(total, 250000u * 4u);  // ~260K parameters in F32
  EXPECT_LE(total, g.file_size());
  const GgufTensorInfo& last = g.tensors().back();
  EXPECT_LE(last.data + last.n_bytes, emb->data - emb->offset + g.file_size());
  // The embedding holds real (finite, not all-zero) weights.
  const float* w = reinterpret_cast<const float*>(emb->data);
  double sum_abs = 0;
  for (int i = 0; i < 64 * 512; ++i) {
    ASSERT_TRUE(std::isfinite(w[i]));
    sum_abs += std::fabs(w[i]);
  }
  EXPECT_GT(sum_abs, 1.0);
  EXPECT_NE(g.FindTensor("blk.4.ffn_down.weight"), nullptr);
  EXPECT_EQ(g.FindTensor("blk.5.ffn_down.weight"), nullptr);
}

TEST(GgufValueTest, AsIntOfAnyFloatIsDefined) {
  // A float from a file may be anything (fuzz/regressions/gguf_model/float-as-int-overflow).
  EXPECT_EQ(GgufValue::F32(-2.75f).AsInt(), -2);
  EXPECT_EQ(GgufValue::F32(7.13625e31f).AsInt(), INT64_MAX);
  EXPECT_EQ(GgufValue::F32(-1e30f).AsInt(), INT64_MIN);
  EXPECT_EQ(GgufValue::F32(INFINITY).AsInt(), INT64_MAX);
  EXPECT_EQ(GgufValue::F32(NAN).AsInt(), 0);
  GgufValue d;
  d.type = GgufType::kFloat64;
  d.f = -0x1p63;
  EXPECT_EQ(d.AsInt(), INT64_MIN);
  d.f = 0x1p62;
  EXPECT_EQ(d.AsInt(), int64_t{1} << 62);
}

TEST(GgufFileTest, OpenMissingFileNamesPath) {
  auto f = GgufFile::Open("/nonexistent/x.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent/x.gguf"), std::string::npos);
}

GgufValue Typed(GgufType t, uint64_t u, int64_t i, double f) {
  GgufValue v;
  v.type = t;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}

TEST(GgufWriterTest, RoundTripsEveryValueTypeAndTensors) {
  GgufWriter w;
  w.Set("u8", Typed(GgufType::kUint8, 200, 0, 0));
  w.Set("i8", Typed(GgufType::kInt8, 0, -100, 0));
  w.Set("u16", Typed(GgufType::kUint16, 60000, 0, 0));
  w.Set("i16", Typed(GgufType::kInt16, 0, -30000, 0));
  w.Set("u32", GgufValue::U32(4000000000u));
  w.Set("i32", GgufValue::I32(-2000000000));
  w.Set("f32", GgufValue::F32(1.5f));
  w.Set("bool", GgufValue::Bool(true));
  w.Set("str", GgufValue::String("hello \0world"));
  w.Set("u64", GgufValue::U64(18000000000000000000ull));
  w.Set("i64", Typed(GgufType::kInt64, 0, -9000000000000000000ll, 0));
  w.Set("f64", Typed(GgufType::kFloat64, 0, 0, 3.141592653589793));
  w.Set("strs", GgufValue::StringArray({"a", "", "ccc"}));
  w.Set("f32s", GgufValue::F32Array({1.0f, -2.5f}));
  w.Set("i32s", GgufValue::I32Array({}));
  w.Set("nested",
        GgufValue::Array(GgufType::kArray,
                         {GgufValue::I32Array({1, 2}),
                          GgufValue::Array(GgufType::kArray, {GgufValue::StringArray({"deep"})})}));
  w.Set("bools", GgufValue::Array(GgufType::kBool, {GgufValue::Bool(true), GgufValue::Bool(false),
                                                    GgufValue::Bool(true)}));
  w.Set("mixed", GgufValue::Array(GgufType::kInt8, {GgufValue::I32(-3), GgufValue::U32(127),
                                                    GgufValue::I32(-128), GgufValue::I32(0)}));
  w.Set("u64s", GgufValue::Array(GgufType::kUint64, {GgufValue::U64(18000000000000000000ull)}));
  w.Set("f64s",
        GgufValue::Array(GgufType::kFloat64, {Typed(GgufType::kFloat64, 0, 0, 3.141592653589793)}));
  w.Set("u32", GgufValue::U32(7));  // replaces, keeps position
  w.Set("general.alignment", GgufValue::U32(64));

  std::vector<uint8_t> f32(3 * 2 * 4), f16(32 * 2), q8(34 * 2 * 3), i8(5);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(i * 7);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<uint8_t>(i + 1);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 3);
  for (size_t i = 0; i < i8.size(); ++i) i8[i] = static_cast<uint8_t>(100 + i);
  w.AddTensor("a", {3, 2}, DType::kF32, f32);
  w.AddTensor("b", {32}, DType::kF16, f16);
  w.AddTensor("c", {64, 3}, DType::kQ8_0, q8);
  w.AddTensorLazy("d", {5, 1, 1, 1}, DType::kI8,
                  [&](uint8_t* out) { std::memcpy(out, i8.data(), i8.size()); });

  const std::string bytes = w.Serialize();
  auto f = GgufFile::FromBytes(bytes, "mem.gguf");
  ASSERT_TRUE(f.ok()) << f.status().message();
  const GgufFile& g = **f;
  EXPECT_EQ(g.alignment(), 64u);
  ASSERT_EQ(g.metadata().size(), 21u);
  EXPECT_EQ(g.metadata()[4].first, "u32");
  EXPECT_EQ(g.GetInt("u8"), 200);
  EXPECT_EQ(g.GetInt("i8"), -100);
  EXPECT_EQ(g.GetInt("u16"), 60000);
  EXPECT_EQ(g.GetInt("i16"), -30000);
  EXPECT_EQ(g.GetInt("u32"), 7);
  EXPECT_EQ(g.GetInt("i32"), -2000000000);
  EXPECT_EQ(g.GetFloat("f32"), 1.5);
  EXPECT_EQ(g.GetInt("bool"), 1);
  EXPECT_EQ(g.Find("bool")->type, GgufType::kBool);
  EXPECT_EQ(g.GetString("str"), std::string("hello "));
  EXPECT_EQ(g.Find("u64")->u, 18000000000000000000ull);
  EXPECT_EQ(g.GetInt("i64"), -9000000000000000000ll);
  EXPECT_EQ(g.GetFloat("f64"), 3.141592653589793);
  EXPECT_EQ(g.GetFloat("u32"), 7.0);
  ASSERT_NE(g.GetArray("strs"), nullptr);
  EXPECT_EQ(g.GetArray("strs")->size(), 3u);
  EXPECT_EQ(g.GetArray("strs")->strings[2], "ccc");
  EXPECT_EQ(g.GetArray("strs")->At(1).str, "");
  EXPECT_EQ(g.GetArray("f32s")->At(1).f, -2.5);
  EXPECT_EQ(g.GetArray("f32s")->At(1).type, GgufType::kFloat32);
  EXPECT_TRUE(g.GetArray("i32s")->empty());
  EXPECT_EQ(g.Find("i32s")->elem_type, GgufType::kInt32);
  const GgufValue& nested = *g.GetArray("nested");
  ASSERT_EQ(nested.size(), 2u);
  EXPECT_EQ(nested.arrays[0].elem_type, GgufType::kInt32);
  EXPECT_EQ(nested.arrays[0].At(1).i, 2);
  EXPECT_EQ(nested.arrays[1].arrays[0].strings[0], "deep");
  const GgufValue& bools = *g.GetArray("bools");
  ASSERT_EQ(bools.size(), 3u);
  EXPECT_EQ(bools.At(1).u, 0u);
  EXPECT_EQ(bools.At(2).AsInt(), 1);
  const GgufValue& small = *g.GetArray("mixed");
  ASSERT_EQ(small.size(), 4u);
  EXPECT_EQ(small.At(0).AsInt(), -3);
  EXPECT_EQ(small.At(1).AsInt(), 127);
  EXPECT_EQ(small.At(2).AsInt(), -128);
  EXPECT_EQ(small.At(3).type, GgufType::kInt8);
  const GgufValue& u64s = *g.GetArray("u64s");
  EXPECT_EQ(u64s.At(0).u, 18000000000000000000ull);
  EXPECT_EQ(g.GetArray("f64s")->At(0).f, 3.141592653589793);

  ASSERT_EQ(g.tensors().size(), 4u);
  const std::vector<uint8_t>* want[] = {&f32, &f16, &q8, &i8};
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kQ8_0, DType::kI8};
  for (int i = 0; i < 4; ++i) {
    const GgufTensorInfo& t = g.tensors()[i];
    EXPECT_EQ(t.dtype, dtypes[i]);
    EXPECT_EQ(t.offset % 64, 0u);
    ASSERT_EQ(t.n_bytes, want[i]->size());
    EXPECT_EQ(std::memcmp(t.data, want[i]->data(), t.n_bytes), 0) << t.name;
  }
  EXPECT_EQ(g.FindTensor("c")->dims, (std::vector<int64_t>{64, 3}));

  // The same bytes through a real file and mmap.
  const std::string path = ProcessTempPath("roundtrip.gguf");
  ASSERT_TRUE(w.Write(path).ok());
  auto f2 = GgufFile::Open(path);
  ASSERT_TRUE(f2.ok()) << f2.status().message();
  EXPECT_EQ((*f2)->file_size(), bytes.size());
  EXPECT_EQ(std::memcmp((*f2)->FindTensor("d")->data, i8.data(), 5), 0);
  std::remove(path.c_str());
}

TEST(GgufWriterTest, WriteToBadPathFails) {
  GgufWriter w;
  Status s = w.Write("/nonexistent_dir/out.gguf");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent_dir/out.gguf"), std::string::npos);
}

TEST(GgufWriterTest, WriteGoesThroughATempFileRenamedAtTheEnd) {
  const std::string path =
      ::testing::TempDir() + "/goose_atomic_" + std::to_string(::getpid()) + ".gguf";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("old", f);
    std::fclose(f);
  }
  GgufWriter w;
  w.Set("k", GgufValue::U32(1));
  bool checked = false;
  w.AddTensorLazy("t", {8}, DType::kF32, [&](uint8_t* out) {
    // Mid-write: the bytes go to the temp file and the old file is still whole.
    EXPECT_TRUE(std::filesystem::exists(tmp));
    EXPECT_EQ(std::filesystem::file_size(path), 3u);
    std::memset(out, 0, 32);
    checked = true;
  });
  ASSERT_TRUE(w.Write(path).ok());
  EXPECT_TRUE(checked);
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_TRUE(GgufFile::Open(path).ok());
  std::remove(path.c_str());

  // A failing rename (the target is a directory) reports the path and leaves no temp file.
  const std::string dir = path + ".dir";
  std::filesystem::create_directory(dir);
  GgufWriter plain;
  plain.Set("k", GgufValue::U32(1));
  Status s = plain.Write(dir);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp." + std::to_string(::getpid())));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  std::filesystem::remove(dir);
}

}  // namespace
}  // namespace goose
