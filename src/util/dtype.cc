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
    {DType::kF32, {"f32", 1, 4}},
    {DType::kF16, {"f16", 1, 2}},
    {DType::kQ4_0, {"q4_0", 32, 18}},
    {DType::kQ4_1, {"q4_1", 32, 20}},
    {DType::kQ5_0, {"q5_0", 32, 22}},
    {DType::kQ5_1, {"q5_1", 32, 24}},
    {DType::kQ8_0, {"q8_0", 32, 34}},
    {DType::kQ8_1, {"q8_1", 32, 36}},
    {DType::kQ2_K, {"q2_k", 256, 84}},
    {DType::kQ3_K, {"q3_k", 256, 110}},
    {DType::kQ4_K, {"q4_k", 256, 144}},
    {DType::kQ5_K, {"q5_k", 256, 176}},
    {DType::kQ6_K, {"q6_k", 256, 210}},
    {DType::kQ8_K, {"q8_k", 256, 292}},
    {DType::kIQ2_XXS, {"iq2_xxs", 256, 66}},
    {DType::kIQ2_XS, {"iq2_xs", 256, 74}},
    {DType::kIQ3_XXS, {"iq3_xxs", 256, 98}},
    {DType::kIQ1_S, {"iq1_s", 256, 50}},
    {DType::kIQ4_NL, {"iq4_nl", 32, 18}},
    {DType::kIQ3_S, {"iq3_s", 256, 110}},
    {DType::kIQ2_S, {"iq2_s", 256, 82}},
    {DType::kIQ4_XS, {"iq4_xs", 256, 136}},
    {DType::kI8, {"i8", 1, 1}},
    {DType::kI16, {"i16", 1, 2}},
    {DType::kI32, {"i32", 1, 4}},
    {DType::kI64, {"i64", 1, 8}},
    {DType::kF64, {"f64", 1, 8}},
    {DType::kIQ1_M, {"iq1_m", 256, 56}},
    {DType::kBF16, {"bf16", 1, 2}},
    {DType::kTQ1_0, {"tq1_0", 256, 54}},
    {DType::kTQ2_0, {"tq2_0", 256, 66}},
    {DType::kMXFP4, {"mxfp4", 32, 17}},
};
// What goose does with each dtype it supports (every other type: nothing but its geometry).
struct SupportEntry {
  DType type;
  DTypeSupport support;
};
constexpr SupportEntry kSupport[] = {
    //              compute quantize int_dot tiles
    {DType::kF32, {true, true, false, false}},  {DType::kF16, {true, true, false, false}},
    {DType::kBF16, {true, true, false, false}}, {DType::kQ8_0, {true, true, true, true}},
    {DType::kQ4_0, {true, true, true, true}},   {DType::kQ5_0, {true, true, true, true}},
    {DType::kQ4_K, {true, true, true, true}},   {DType::kQ5_K, {true, true, true, false}},
    {DType::kQ6_K, {true, true, true, false}},
};
}  // namespace

DTypeInfo GetDTypeInfo(uint32_t type_id) {
  for (const Entry& e : kTypes) {
    if (static_cast<uint32_t>(e.type) == type_id) return e.info;
  }
  return DTypeInfo{"unknown", 0, 0};
}

DTypeSupport GetDTypeSupport(DType t) {
  for (const SupportEntry& e : kSupport) {
    if (e.type == t) return e.support;
  }
  return DTypeSupport{};
}

bool DTypeSupported(DType t) { return GetDTypeSupport(t).compute; }

std::string DTypeNamesWith(bool DTypeSupport::*capability) {
  std::string names;
  for (const SupportEntry& e : kSupport) {
    if (!(e.support.*capability)) continue;
    if (!names.empty()) names += ", ";
    names += GetDTypeInfo(e.type).name;
  }
  return names;
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
