#include "util/dtype.h"

#include <cctype>
#include <string>

namespace goose {

namespace {
struct Entry {
  DType type;
  DTypeInfo info;
};
constexpr Entry kTypes[] = {
    {DType::kF32, {"f32", 1, 4}},         {DType::kF16, {"f16", 1, 2}},
    {DType::kQ4_0, {"q4_0", 32, 18}},     {DType::kQ4_1, {"q4_1", 32, 20}},
    {DType::kQ5_0, {"q5_0", 32, 22}},     {DType::kQ5_1, {"q5_1", 32, 24}},
    {DType::kQ8_0, {"q8_0", 32, 34}},     {DType::kQ8_1, {"q8_1", 32, 36}},
    {DType::kQ2_K, {"q2_k", 256, 84}},    {DType::kQ3_K, {"q3_k", 256, 110}},
    {DType::kQ4_K, {"q4_k", 256, 144}},   {DType::kQ5_K, {"q5_k", 256, 176}},
    {DType::kQ6_K, {"q6_k", 256, 210}},   {DType::kQ8_K, {"q8_k", 256, 292}},
    {DType::kIQ2_XXS, {"iq2_xxs", 256, 66}}, {DType::kIQ2_XS, {"iq2_xs", 256, 74}},
    {DType::kIQ3_XXS, {"iq3_xxs", 256, 98}}, {DType::kIQ1_S, {"iq1_s", 256, 50}},
    {DType::kIQ4_NL, {"iq4_nl", 32, 18}}, {DType::kIQ3_S, {"iq3_s", 256, 110}},
    {DType::kIQ2_S, {"iq2_s", 256, 82}},  {DType::kIQ4_XS, {"iq4_xs", 256, 136}},
    {DType::kI8, {"i8", 1, 1}},           {DType::kI16, {"i16", 1, 2}},
    {DType::kI32, {"i32", 1, 4}},         {DType::kI64, {"i64", 1, 8}},
    {DType::kF64, {"f64", 1, 8}},         {DType::kIQ1_M, {"iq1_m", 256, 56}},
    {DType::kBF16, {"bf16", 1, 2}},       {DType::kTQ1_0, {"tq1_0", 256, 54}},
    {DType::kTQ2_0, {"tq2_0", 256, 66}},  {DType::kMXFP4, {"mxfp4", 32, 17}},
};
}  // namespace

DTypeInfo GetDTypeInfo(uint32_t type_id) {
  for (const Entry& e : kTypes) {
    if (static_cast<uint32_t>(e.type) == type_id) return e.info;
  }
  return DTypeInfo{"unknown", 0, 0};
}

bool DTypeSupported(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

bool ParseDType(std::string_view name, DType* out) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Entry& e : kTypes) {
    if (e.info.name == lower) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

}  // namespace goose
