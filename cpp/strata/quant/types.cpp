#include "strata/quant/types.h"

#include <string>

#include "strata/util/error.h"

namespace strata::quant {
namespace {

struct Entry {
  uint32_t id;
  TypeInfo info;
};

// Block geometry as ggml defines it (ggml.c type_traits).
constexpr Entry kTypes[] = {
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},      {3, {"Q4_1", 32, 20}},
    {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},      {8, {"Q8_0", 32, 34}},      {9, {"Q8_1", 32, 36}},
    {10, {"Q2_K", 256, 84}},    {11, {"Q3_K", 256, 110}},   {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},
    {14, {"Q6_K", 256, 210}},   {15, {"Q8_K", 256, 292}},   {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},
    {18, {"IQ3_XXS", 256, 98}}, {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},
    {22, {"IQ2_S", 256, 82}},   {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},         {25, {"I16", 1, 2}},
    {26, {"I32", 1, 4}},        {27, {"I64", 1, 8}},        {28, {"F64", 1, 8}},        {29, {"IQ1_M", 256, 56}},
    {30, {"BF16", 1, 2}},       {34, {"TQ1_0", 256, 54}},   {35, {"TQ2_0", 256, 66}},   {39, {"MXFP4", 32, 17}},
};

// The internal repacked types (types.h): looked up by type_info only.
constexpr Entry kInternalTypes[] = {
    {0x1002, {"Q4_0_R16", 32, 18}},   {0x1006, {"Q5_0_R16", 32, 22}},   {0x1008, {"Q8_0_R16", 32, 34}},
    {0x100A, {"Q2_K_R16", 256, 84}},  {0x100B, {"Q3_K_R16", 256, 110}}, {0x100C, {"Q4_K_R16", 256, 144}},
    {0x100D, {"Q5_K_R16", 256, 176}}, {0x100E, {"Q6_K_R16", 256, 210}}, {0x1017, {"IQ4_XS_R16", 256, 136}},
    {0x1014, {"IQ4_NL_R16", 32, 18}}, {0x1007, {"Q5_1_R16", 32, 24}},
};

}  // namespace

std::optional<GGMLType> type_from_id(uint32_t id) {
  for (const auto& e : kTypes)
    if (e.id == id) return static_cast<GGMLType>(id);
  return std::nullopt;
}

std::optional<GGMLType> type_from_name(std::string_view name) {
  for (const auto& e : kTypes) {
    const std::string_view n = e.info.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < n.size() && same; ++i) {
      char c = name[i];
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
      same = c == n[i];
    }
    if (same) return static_cast<GGMLType>(e.id);
  }
  return std::nullopt;
}

const TypeInfo& type_info(GGMLType t) {
  for (const auto& e : kTypes)
    if (e.id == static_cast<uint32_t>(t)) return e.info;
  for (const auto& e : kInternalTypes)
    if (e.id == static_cast<uint32_t>(t)) return e.info;
  throw_error(ErrorKind::Internal, "unknown ggml type id " + std::to_string(static_cast<uint32_t>(t)));
}

std::size_t row_bytes(GGMLType t, int64_t n) {
  const TypeInfo& info = type_info(t);
  if (n < 0 || n % info.block_size != 0)
    throw_error(ErrorKind::Value, std::string("row of ") + std::to_string(n) + " elements is not a multiple of the " +
                                      info.name + " block (" + std::to_string(info.block_size) + ")");
  return static_cast<std::size_t>(n / info.block_size) * info.type_size;
}

bool type_supported(GGMLType t) {
  switch (t) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16:
    case GGMLType::Q8_0:
    case GGMLType::Q4_0:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
    case GGMLType::IQ4_NL:
    case GGMLType::Q4_K:
    case GGMLType::Q6_K:
    case GGMLType::Q2_K:
    case GGMLType::IQ4_XS:
    case GGMLType::Q3_K:
    case GGMLType::Q5_K:
    case GGMLType::IQ2_XXS:
    case GGMLType::IQ2_XS:
    case GGMLType::IQ3_XXS:
    case GGMLType::IQ3_S:
    case GGMLType::IQ2_S:
    case GGMLType::IQ1_S:
    case GGMLType::IQ1_M: return true;
    default: return false;
  }
}

}  // namespace strata::quant
