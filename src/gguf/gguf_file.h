// GgufFile: a memory-mapped, bounds-checked reader for GGUF v2 and v3 files.
//
// Contract
// - Open() maps the file read-only and parses header, metadata and tensor directory eagerly.
//   Every malformed input yields a Status whose message names the file, what is wrong, and the
//   byte offset and/or key/tensor name: bad magic or version, truncation anywhere, absurd
//   counts/lengths (never allocates more than the file could hold), unknown value or tensor
//   types, duplicate keys or tensor names, tensor data misaligned or past the end of the file.
//   It never aborts, never reads out of bounds.
// - Metadata values are fully materialized (nested arrays included) in a compact form (see
//   GgufValue), and all of them together may take at most kMaxMetadataExpansion times the file
//   size (plus 1 MiB): a file of absurd metadata is an error, never a huge allocation. Tensor
//   data stays in the mapping and is exposed as a pointer valid for the lifetime of the GgufFile.
// - Immutable after Open(); safe to share across threads.
// Format reference: llama.cpp ggml/include/gguf.h (first 30 lines) and docs/gguf.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/dtype.h"
#include "util/status.h"

namespace goose {

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Bytes of one element of a fixed-size type (numbers, bool); 0 for strings and arrays.
size_t GgufScalarBytes(GgufType t);

// One metadata value. Scalars live in the matching field. Arrays (type kArray) hold elements of
// type `elem_type`, stored by kind so that an array costs about what it takes in the file:
// numbers and bools packed little-endian exactly as in the file, strings one std::string each,
// nested arrays one GgufValue each.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  uint64_t u = 0;                          // unsigned integer types and bool
  int64_t i = 0;                           // signed integer types
  double f = 0;                            // float32 / float64
  std::string str;                         // string
  GgufType elem_type = GgufType::kUint32;  // arrays only
  std::vector<uint8_t> packed;       // [size() * GgufScalarBytes(elem_type)] number/bool elements
  std::vector<std::string> strings;  // [size()] string elements
  std::vector<GgufValue> arrays;     // [size()] nested array elements

  bool is_integer() const;
  bool is_float() const { return type == GgufType::kFloat32 || type == GgufType::kFloat64; }
  // Integer value of any integer/bool type (unsigned reinterpreted as int64); a float's is
  // truncated toward zero and saturated to int64 (NaN gives 0).
  int64_t AsInt() const;
  // Numeric value of any integer or float type.
  double AsDouble() const;

  // Arrays: element count, and element `idx` (< size()) of a number/bool/string array as a
  // scalar value of type elem_type (a copy; nested arrays are read from `arrays`).
  size_t size() const;
  bool empty() const { return size() == 0; }
  GgufValue At(size_t idx) const;
  // Appends `e` (of any type convertible to elem_type) to an array. For writers and tests.
  void Append(const GgufValue& e);

  // Constructors for writers and tests.
  static GgufValue U32(uint32_t v);
  static GgufValue I32(int32_t v);
  static GgufValue U64(uint64_t v);
  static GgufValue F32(float v);
  static GgufValue Bool(bool v);
  static GgufValue String(std::string v);
  static GgufValue Array(GgufType elem_type, const std::vector<GgufValue>& elems);
  static GgufValue StringArray(std::vector<std::string> v);
  static GgufValue F32Array(const std::vector<float>& v);
  static GgufValue I32Array(const std::vector<int32_t>& v);
};

std::string_view GgufTypeName(GgufType t);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ne[0] first: ne[0] is the contiguous (row) dimension
  DType dtype = DType::kF32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping

  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Bound on the memory all metadata values may take, as a multiple of the file size.
  static constexpr uint64_t kMaxMetadataExpansion = 8;

  static StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Parses an in-memory image (copied); `name` is used in error messages. For tests.
  static StatusOr<std::unique_ptr<GgufFile>> FromBytes(std::string_view bytes,
                                                       const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  // Byte offset of the data section (aligned end of the tensor directory).
  uint64_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* Find(std::string_view key) const;
  // Typed look-ups: nullopt if absent or of an incompatible type.
  std::optional<int64_t> GetInt(std::string_view key) const;
  std::optional<double> GetFloat(std::string_view key) const;  // int or float types
  std::optional<std::string> GetString(std::string_view key) const;
  const GgufValue* GetArray(std::string_view key) const;  // a value of type kArray

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* FindTensor(std::string_view name) const;

  // Tells the OS that the whole pages inside [p, p + n) of the file's data are not needed now
  // (a mapped file drops them from this process and reads them again if touched; an in-memory
  // image keeps them). For tensors copied elsewhere at load time.
  void ReleasePages(const uint8_t* p, uint64_t n) const;

 private:
  GgufFile() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  bool mmapped_ = false;
  std::string owned_;  // FromBytes storage
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace goose
