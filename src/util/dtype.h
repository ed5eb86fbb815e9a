// DType: tensor element formats, numbered as in GGML/GGUF so the ids read from a GGUF file map
// directly. Every GGML type has its block geometry here (so a GGUF reader can validate sizes of
// any file); `GetDTypeSupport` says what goose does with each: one table for every layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace goose {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

struct DTypeInfo {
  std::string_view name;    // "f32", "q8_0", ...
  int64_t block_size = 0;   // elements per block (1 for plain types); 0 = unknown type id
  int64_t block_bytes = 0;  // bytes per block
};

// Geometry of a GGML type id; block_size == 0 if the id is not a known GGML type.
DTypeInfo GetDTypeInfo(uint32_t type_id);
inline DTypeInfo GetDTypeInfo(DType t) { return GetDTypeInfo(static_cast<uint32_t>(t)); }

// What goose does with a dtype. One table (dtype.cc) that every layer reads - the model loader,
// the quantizers, the kernels' dispatch - so that their lists cannot drift apart (a dtype that
// the loader accepts and a kernel lacks would turn a user's file into an abort). quantize and
// int_dot imply compute; tiles implies int_dot.
struct DTypeSupport {
  bool compute = false;   // a model's weights may have it: MatMul, GetRow, DequantizeRow (ops)
  bool quantize = false;  // QuantizeRow writes it (ops/quant.h): synth's --dtype
  bool int_dot = false;   // MatMul multiplies its integer levels (ops/qmatmul.h), else f32 rows
  bool tiles = false;     // the AVX-512 kernel's load-time tiles exist for it (ops/qmatmul.h)
};
DTypeSupport GetDTypeSupport(DType t);

// Types goose's kernels implement (weights): GetDTypeSupport(t).compute. Others load in the
// GGUF reader but not as a model.
bool DTypeSupported(DType t);

// The names of the dtypes that have `capability` ("f32, f16, bf16, q8_0, ..."), for messages.
std::string DTypeNamesWith(bool DTypeSupport::*capability);

// Parses "f32", "f16", "bf16", "q8_0", ... (case-insensitive). Returns false if unknown.
bool ParseDType(std::string_view name, DType* out);

// Bytes of a row of n elements (n must be a multiple of the block size).
inline int64_t RowBytes(DType t, int64_t n) {
  const DTypeInfo info = GetDTypeInfo(t);
  return n / info.block_size * info.block_bytes;
}

}  // namespace goose
