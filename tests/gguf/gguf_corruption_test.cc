// Malformed GGUF images: each kind of corruption must be reported (never a crash) with a message
// that names the file, what is wrong and the offset / key / tensor. Plus truncation at every
// length and deterministic byte flips over the real tiny model.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "test_temp.h"
#include "util/rng.h"

// Counts every byte requested from operator new in this test binary, so a test can bound what
// parsing allocates (cumulative, not net: freed memory still counts).
static std::atomic<uint64_t> g_new_bytes{0};

void* operator new(std::size_t n) {
  g_new_bytes.fetch_add(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace goose {
namespace {

// Hand-assembles GGUF bytes, including invalid ones.
struct Raw {
  std::string b;
  Raw& U8(uint8_t v) { return Put(v); }
  Raw& U32(uint32_t v) { return Put(v); }
  Raw& U64(uint64_t v) { return Put(v); }
  Raw& Str(const std::string& s) {
    U64(s.size());
    b += s;
    return *this;
  }
  Raw& Header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b += "GGUF";
    U32(version);
    U64(n_tensors);
    return U64(n_kv);
  }
  Raw& KvU32(const std::string& key, uint32_t v) { return Str(key).U32(4).U32(v); }
  // Tensor entry: name, dims, type, offset.
  Raw& Tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) U64(d);
    return U32(type).U64(offset);
  }
  Raw& PadTo(size_t align) {
    while (b.size() % align) b += '\0';
    return *this;
  }
  Raw& Zeros(size_t n) {
    b.append(n, '\0');
    return *this;
  }
  template <typename T>
  Raw& Put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
};

struct Case {
  const char* label;
  std::string bytes;
  std::vector<std::string> must_contain;
};

std::vector<Case> Cases() {
  std::vector<Case> c;
  const uint64_t kHuge = 0xffffffffffffffffull;
  c.push_back(
      {"bad magic", Raw().U32(0x46554747 + 1).U32(3).U64(0).U64(0).b, {"magic", "offset 0"}});
  c.push_back({"too short for magic", "GG", {"magic"}});
  c.push_back({"version 1", Raw().Header(0, 0, 1).b, {"version 1", "not supported", "offset 4"}});
  c.push_back({"version 7", Raw().Header(0, 0, 7).b, {"unsupported GGUF version 7", "offset 4"}});
  c.push_back({"truncated header",
               Raw().Header(0, 0).b.substr(0, 20),
               {"truncated", "metadata count", "offset 16"}});
  c.push_back({"absurd n_kv", Raw().Header(0, kHuge).b, {"metadata count", "offset 16"}});
  c.push_back({"absurd n_tensors", Raw().Header(1ull << 30, 0).b, {"tensor count", "offset 8"}});
  c.push_back({"absurd key length",
               Raw().Header(0, 1).U64(kHuge).Zeros(20).b,
               {"key length 18446744073709551615", "offset 24", "key #0"}});
  c.push_back({"absurd string value length",
               Raw().Header(0, 1).Str("general.name").U32(8).U64(1ull << 40).Zeros(16).b,
               {"string length 1099511627776", "general.name", "offset 48"}});
  c.push_back({"absurd array count",
               Raw().Header(0, 1).Str("arr").U32(9).U32(5).U64(1ull << 20).Zeros(64).b,
               {"array count 1048576", "'arr'", "offset"}});
  {
    Raw r;
    r.Header(0, 1).Str("deep");
    for (int i = 0; i < 20; ++i) r.U32(9).U32(9).U64(1);  // typed array of arrays, count 1
    r.Zeros(64);
    // First U32(9) is the value type, then element type + count per level; rebuild cleanly:
    Raw d;
    d.Header(0, 1).Str("deep").U32(9);
    for (int i = 0; i < 20; ++i) d.U32(9).U64(1);
    d.U32(4).U64(0).Zeros(64);
    c.push_back({"nesting too deep", d.b, {"nested deeper than 16", "'deep'", "offset"}});
  }
  c.push_back({"unknown value type",
               Raw().Header(0, 1).Str("k").U32(13).U32(0).b,
               {"unknown value type 13", "'k'", "offset 33"}});
  c.push_back({"unknown array element type",
               Raw().Header(0, 1).Str("k").U32(9).U32(99).U64(0).b,
               {"unknown array element type 99", "'k'"}});
  c.push_back({"bool not 0/1",
               Raw().Header(0, 1).Str("flag").U32(7).U8(2).b,
               {"bool value 2", "'flag'", "offset 40"}});
  c.push_back({"truncated value",
               Raw().Header(0, 1).Str("k").U32(10).U32(0).b,
               {"truncated", "uint64 value", "'k'"}});
  c.push_back({"duplicate key",
               Raw().Header(0, 2).KvU32("a.b", 1).KvU32("a.b", 2).b,
               {"duplicate key 'a.b'", "offset 43", "key #1"}});
  // Names are quoted escaped (util/escape.h): invalid UTF-8, controls, quotes.
  c.push_back({"key name not UTF-8",
               Raw().Header(0, 1).Str("tokenize\xff\xff").U32(99).b,
               {"key #0 'tokenize\\xFF\\xFF'", "unknown value type 99"}});
  c.push_back({"key name with controls",
               Raw().Header(0, 1).Str("a\n\x1b[2J'b").U32(99).b,
               {"key #0 'a\\n\\x1B[2J\\'b'"}});
  c.push_back({"tensor name not UTF-8",
               Raw().Header(2, 0).Tensor("w\xc0", {32}, 0, 0).Tensor("w\xc0", {32}, 0, 128).b,
               {"duplicate tensor name 'w\\xC0'", "tensor #1 'w\\xC0'"}});
  c.push_back({"alignment not power of two",
               Raw().Header(0, 1).KvU32("general.alignment", 48).b,
               {"general.alignment 48", "power of two", "offset"}});
  c.push_back({"alignment as string",
               Raw().Header(0, 1).Str("general.alignment").U32(8).Str("32").b,
               {"general.alignment must be an integer, not string"}});
  c.push_back({"alignment zero",
               Raw().Header(0, 1).KvU32("general.alignment", 0).b,
               {"general.alignment 0", "power of two"}});
  c.push_back({"unknown tensor type",
               Raw().Header(1, 0).Tensor("w", {32}, 4, 0).PadTo(32).Zeros(128).b,
               {"unknown tensor type 4", "'w'", "offset 45"}});
  c.push_back({"n_dims 0",
               Raw().Header(1, 0).Str("w").U32(0).U32(0).U64(0).Zeros(64).b,
               {"n_dims 0", "'w'", "offset 33"}});
  c.push_back({"n_dims 5",
               Raw().Header(1, 0).Tensor("w", {1, 1, 1, 1, 1}, 0, 0).Zeros(64).b,
               {"n_dims 5", "'w'"}});
  c.push_back({"dim zero",
               Raw().Header(1, 0).Tensor("w", {4, 0}, 0, 0).Zeros(64).b,
               {"dimension 1 is 0", "'w'", "offset 45"}});
  c.push_back({"dim negative",
               Raw().Header(1, 0).Tensor("w", {kHuge}, 0, 0).Zeros(64).b,
               {"dimension 0 is -1", "'w'"}});
  c.push_back({"element count overflow",
               Raw().Header(1, 0).Tensor("w", {1ull << 32, 1ull << 32}, 0, 0).Zeros(64).b,
               {"element count overflows", "'w'"}});
  c.push_back({"ne0 not multiple of block",
               Raw().Header(1, 0).Tensor("q", {33}, 8, 0).PadTo(32).Zeros(64).b,
               {"ne[0] = 33", "q8_0 block size 32", "'q'"}});
  c.push_back(
      {"duplicate tensor",
       Raw().Header(2, 0).Tensor("w", {8}, 0, 0).Tensor("w", {8}, 0, 32).PadTo(32).Zeros(64).b,
       {"duplicate tensor name 'w'", "tensor #1", "offset"}});
  c.push_back({"misaligned tensor offset",
               Raw().Header(1, 0).Tensor("w", {8}, 0, 8).PadTo(32).Zeros(64).b,
               {"tensor offset 8", "alignment 32", "'w'"}});
  c.push_back({"data past end",
               Raw().Header(1, 0).Tensor("w", {64}, 0, 0).PadTo(32).Zeros(255).b,
               {"'w'", "past the end", "offset 64"}});
  c.push_back({"huge offset past end",
               Raw().Header(1, 0).Tensor("w", {8}, 0, 1ull << 62).PadTo(32).Zeros(64).b,
               {"'w'", "past the end"}});
  c.push_back({"truncated tensor directory",
               Raw().Header(1, 0).Str("a_long_tensor_name").U32(1).U64(32).U32(0).U32(0).b,
               {"truncated", "tensor offset needs 8 bytes", "offset 66", "'a_long_tensor_name'"}});
  return c;
}

TEST(GgufCorruptionTest, EachKindIsReportedWithContext) {
  for (const Case& c : Cases()) {
    auto f = GgufFile::FromBytes(c.bytes, "bad.gguf");
    ASSERT_FALSE(f.ok()) << c.label;
    const std::string msg = f.status().message();
    if (std::getenv("GOOSE_PRINT_ERRORS")) std::printf("%-28s %s\n", c.label, msg.c_str());
    EXPECT_EQ(msg.rfind("bad.gguf: ", 0), 0u) << c.label << ": " << msg;
    for (unsigned char ch : msg) {
      EXPECT_TRUE(ch >= 0x20 && ch < 0x7F) << c.label << ": raw byte in the message: " << msg;
    }
    for (const std::string& want : c.must_contain) {
      EXPECT_NE(msg.find(want), std::string::npos)
          << c.label << ": message lacks \"" << want << "\": " << msg;
    }
  }
}

// Files whose metadata would be huge once materialized: each either parses into a compact form
// or fails with the memory-bound error, and parsing allocates at most a small multiple of the
// file size (an image of 4 MiB; one GgufValue per element would be ~100x that).
struct MemoryCase {
  const char* label;
  std::string bytes;
  const char* error;        // nullptr: must parse; else a substring of the error
  uint64_t n_elements = 0;  // parsed: element count of the first key's array
};

std::vector<MemoryCase> MemoryCases() {
  constexpr uint64_t kN = 4u << 20;
  std::vector<MemoryCase> c;
  c.push_back({"huge uint8 array", Raw().Header(0, 1).Str("big").U32(9).U32(0).U64(kN).Zeros(kN).b,
               nullptr, kN});
  c.push_back({"huge bool array", Raw().Header(0, 1).Str("big").U32(9).U32(7).U64(kN).Zeros(kN).b,
               nullptr, kN});
  c.push_back({"huge float64 array",
               Raw().Header(0, 1).Str("big").U32(9).U32(12).U64(kN / 8).Zeros(kN).b, nullptr,
               kN / 8});
  c.push_back({"huge array of empty strings",
               Raw().Header(0, 1).Str("strs").U32(9).U32(8).U64(kN / 8).Zeros(kN).b, nullptr,
               kN / 8});
  {
    Raw r;
    r.Header(0, 1).Str("nest").U32(9).U32(9).U64(kN / 12);
    for (uint64_t i = 0; i < kN / 12; ++i) r.U32(0).U64(0);  // empty uint8 arrays
    c.push_back({"huge array of empty arrays", r.b, "would need more than", 0});
  }
  {
    Raw r;  // two arrays of 2 MiB of uint8 each, nested one level
    r.Header(0, 1).Str("nest").U32(9).U32(9).U64(2);
    for (int i = 0; i < 2; ++i) r.U32(0).U64(kN / 2).Zeros(kN / 2);
    c.push_back({"nested huge uint8 arrays", r.b, nullptr, 2});
  }
  {
    Raw r;  // the most key-value pairs a file this size can hold: one uint8 each
    const uint64_t n_kv = kN / 20;
    r.Header(0, n_kv);
    for (uint64_t i = 0; i < n_kv; ++i)
      r.Str(StrFormat("k%06llu", static_cast<unsigned long long>(i))).U32(0).U8(0);
    c.push_back({"huge number of keys", r.b, "would need more than", 0});
  }
  return c;
}

TEST(GgufCorruptionTest, HugeMetadataNeverAllocatesMuchMoreThanTheFile) {
  for (const MemoryCase& c : MemoryCases()) {
    const uint64_t before = g_new_bytes.load();
    auto f = GgufFile::FromBytes(c.bytes, "big.gguf");  // includes one copy of the image
    const uint64_t allocated = g_new_bytes.load() - before;
    EXPECT_LE(allocated, (GgufFile::kMaxMetadataExpansion + 2) * c.bytes.size() + (2u << 20))
        << c.label;
    if (c.error == nullptr) {
      ASSERT_TRUE(f.ok()) << c.label << ": " << f.status().message();
      const GgufValue& v = (*f)->metadata()[0].second;
      EXPECT_EQ(v.size(), c.n_elements) << c.label;
    } else {
      ASSERT_FALSE(f.ok()) << c.label;
      EXPECT_EQ(f.status().message().rfind("big.gguf: ", 0), 0u) << f.status().message();
      EXPECT_NE(f.status().message().find(c.error), std::string::npos)
          << c.label << ": " << f.status().message();
    }
  }
}

TEST(GgufCorruptionTest, BadBoolArrayElementIsReported) {
  auto f = GgufFile::FromBytes(
      Raw().Header(0, 1).Str("flags").U32(9).U32(7).U64(3).U8(1).U8(0).U8(2).b, "bad.gguf");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("bool element 2 is 2"), std::string::npos)
      << f.status().message();
  EXPECT_NE(f.status().message().find("'flags'"), std::string::npos);
}

TEST(GgufCorruptionTest, ValidBaselinesParse) {
  // The same shapes as the corruption cases, minus the defect, are accepted.
  auto ok1 = GgufFile::FromBytes(Raw()
                                     .Header(1, 1)
                                     .KvU32("general.alignment", 64)
                                     .Tensor("w", {64}, 0, 0)
                                     .PadTo(64)
                                     .Zeros(256)
                                     .b,
                                 "ok");
  ASSERT_TRUE(ok1.ok()) << ok1.status().message();
  EXPECT_EQ((*ok1)->alignment(), 64u);
  auto ok2 = GgufFile::FromBytes(
      Raw().Header(1, 0).Tensor("q", {32, 2}, 8, 0).PadTo(32).Zeros(68).b, "ok");
  ASSERT_TRUE(ok2.ok()) << ok2.status().message();
  auto ok3 = GgufFile::FromBytes(Raw().Header(0, 0, 2).b, "ok");
  ASSERT_TRUE(ok3.ok()) << ok3.status().message();
  EXPECT_EQ((*ok3)->version(), 2u);
  Raw d;
  d.Header(0, 1).Str("deep").U32(9);
  for (int i = 0; i < 15; ++i) d.U32(9).U64(1);
  d.U32(4).U64(0);
  auto ok4 = GgufFile::FromBytes(d.b, "ok");
  ASSERT_TRUE(ok4.ok()) << ok4.status().message();
}

TEST(GgufCorruptionTest, EmptyFileOnDisk) {
  const std::string path = ProcessTempPath("empty.gguf");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  auto g = GgufFile::Open(path);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("magic"), std::string::npos);
  std::remove(path.c_str());
}

TEST(GgufCorruptionTest, TruncationAtEveryLengthFails) {
  GgufWriter w;
  w.Set("general.architecture", GgufValue::String("llama"));
  w.Set("n", GgufValue::U32(5));
  w.Set("toks", GgufValue::StringArray({"<s>", "a", "bc"}));
  w.Set("nested", GgufValue::Array(GgufType::kArray, {GgufValue::F32Array({1, 2, 3})}));
  w.AddTensor("x", {8, 2}, DType::kF32, std::vector<uint8_t>(64, 1));
  w.AddTensor("y", {32}, DType::kQ8_0, std::vector<uint8_t>(34, 2));
  const std::string full = w.Serialize();
  auto g = GgufFile::FromBytes(full, "full");
  ASSERT_TRUE(g.ok()) << g.status().message();
  const GgufTensorInfo& last = (*g)->tensors().back();
  // Only the trailing alignment padding after the last tensor is optional.
  const size_t required = (*g)->data_offset() + last.offset + last.n_bytes;
  ASSERT_EQ(required, full.size() - 30);
  for (size_t len = 0; len < full.size(); ++len) {
    auto t = GgufFile::FromBytes(std::string_view(full).substr(0, len), "cut.gguf");
    if (len < required) {
      ASSERT_FALSE(t.ok()) << "length " << len;
      EXPECT_EQ(t.status().message().rfind("cut.gguf: ", 0), 0u) << t.status().message();
    } else {
      EXPECT_TRUE(t.ok()) << "length " << len << ": " << t.status().message();
    }
  }
}

std::string SharedDir() {
  if (const char* env = std::getenv("GOOSE_SHARED")) return env;
  return GOOSE_SHARED_DIR;
}

// calm-style fuzzing, made deterministic: flip bytes of the real model's header, metadata and
// tensor directory; every variant must either parse or fail with a message (ASan/UBSan clean).
TEST(GgufCorruptionTest, ByteFlipsOverRealHeaderNeverCrash) {
  const std::string path = SharedDir() + "/models/stories260K.gguf";
  auto orig = GgufFile::Open(path);
  ASSERT_TRUE(orig.ok()) << orig.status().message();
  const uint64_t region = (*orig)->data_offset();
  ASSERT_GT(region, 1000u);
  std::string bytes((*orig)->file_size(), '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  // Only the header region matters; keep the tensor data so valid variants still load.
  SplitMix64 rng(42);
  int n_ok = 0, n_err = 0;
  const uint8_t kPatterns[] = {0xff, 0x00, 0x80, 0x7f, 0x01};
  for (int iter = 0; iter < 1500; ++iter) {
    std::string b = bytes;
    const int n_flips = 1 + static_cast<int>(rng.Below(3));
    for (int k = 0; k < n_flips; ++k) {
      // Half the flips hit the first 64 bytes (header + first key), where counts live.
      const uint64_t pos = rng.Below(2) ? rng.Below(64) : rng.Below(region);
      const uint64_t how = rng.Below(3);
      if (how == 0) {
        b[pos] = static_cast<char>(b[pos] ^ (1u << rng.Below(8)));
      } else if (how == 1) {
        b[pos] = static_cast<char>(kPatterns[rng.Below(5)]);
      } else {
        b[pos] = static_cast<char>(rng.Next());
      }
    }
    auto g = GgufFile::FromBytes(b, "flip.gguf");
    if (g.ok()) {
      ++n_ok;
      for (const GgufTensorInfo& t : (*g)->tensors()) {
        ASSERT_LE((*g)->data_offset() + t.offset + t.n_bytes, b.size());
      }
    } else {
      ++n_err;
      EXPECT_EQ(g.status().message().rfind("flip.gguf: ", 0), 0u);
    }
  }
  // Both outcomes occur: many flips land in string bytes, many in lengths/counts.
  EXPECT_GT(n_ok, 50);
  EXPECT_GT(n_err, 50);
}

}  // namespace
}  // namespace goose
