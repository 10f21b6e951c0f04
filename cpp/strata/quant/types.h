#pragma once
// ggml tensor types: ids as stored in GGUF, block geometry, names. Which of them strata can
// compute with is `type_supported`; the reader accepts every id it knows the size of.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace strata::quant {

enum class GGMLType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  // strata-internal (never read from or written to a file): weights repacked at load into groups
  // of 16 interleaved rows for the CPU kernels (cpu/repack/repack.h). Same bytes per row as the
  // plain type; type_from_id / type_from_name never return them.
  Q4_0_R16 = 0x1002,
  Q5_0_R16 = 0x1006,
  Q5_1_R16 = 0x1007,
  IQ4_NL_R16 = 0x1014,
  Q8_0_R16 = 0x1008,
  Q2_K_R16 = 0x100A,
  Q3_K_R16 = 0x100B,
  Q4_K_R16 = 0x100C,
  Q5_K_R16 = 0x100D,
  Q6_K_R16 = 0x100E,
  IQ4_XS_R16 = 0x1017,
};

struct TypeInfo {
  const char* name;
  int64_t block_size;     // elements per block (1 for plain types)
  std::size_t type_size;  // bytes per block
};

// nullopt for ids strata does not know (a GGUF naming one is refused).
std::optional<GGMLType> type_from_id(uint32_t id);
// By ggml name ("Q4_0", "IQ4_XS", "BF16" ...), case-insensitive; nullopt when unknown.
std::optional<GGMLType> type_from_name(std::string_view name);
const TypeInfo& type_info(GGMLType t);
inline const char* type_name(GGMLType t) { return type_info(t).name; }
inline int64_t block_size(GGMLType t) { return type_info(t).block_size; }
inline std::size_t type_size(GGMLType t) { return type_info(t).type_size; }
// Bytes of a row of n elements; throws strata::Error(Value) when n is not a multiple of the block.
std::size_t row_bytes(GGMLType t, int64_t n);
// Dequantize / dot kernels exist for this type.
bool type_supported(GGMLType t);

}  // namespace strata::quant
