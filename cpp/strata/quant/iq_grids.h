#pragma once
// The codebooks of the IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S formats and the sign table of the
// formats that store 7 sign bits per 8 elements (iq_grids.cpp); the IQ1_S / IQ1_M codebook
// (iq1s_grid.cpp).
#include <array>
#include <cstdint>

namespace strata::quant {

extern const uint64_t kIQ2XXSGrid[256];  // IQ2_XXS: 8 magnitudes per entry, byte j = element j
extern const uint64_t kIQ2XSGrid[512];   // IQ2_XS: 8 magnitudes per entry, byte j = element j
extern const uint64_t kIQ2SGrid[1024];   // IQ2_S: 8 magnitudes per entry, byte j = element j
extern const uint32_t kIQ3XXSGrid[256];  // IQ3_XXS: 4 magnitudes per entry, byte j = element j
extern const uint32_t kIQ3SGrid[512];    // IQ3_S: 4 magnitudes per entry, byte j = element j
extern const uint64_t kIQ1SGrid[2048];   // IQ1_S / IQ1_M: 8 values −1, 0, +1 per entry, byte j = element j
extern const uint8_t kIQSigns[128];      // 7 stored sign bits -> 8 (even parity); bit j negates element j

// Magnitude j (0..7) of IQ2_XXS / IQ2_XS / IQ2_S grid entry g, and j (0..3) of IQ3_XXS / IQ3_S entry g.
inline int iq2xxs_grid_value(int g, int j) { return static_cast<int>((kIQ2XXSGrid[g] >> (8 * j)) & 0xFF); }
inline int iq2xs_grid_value(int g, int j) { return static_cast<int>((kIQ2XSGrid[g] >> (8 * j)) & 0xFF); }
inline int iq2s_grid_value(int g, int j) { return static_cast<int>((kIQ2SGrid[g] >> (8 * j)) & 0xFF); }
inline int iq3xxs_grid_value(int g, int j) { return static_cast<int>((kIQ3XXSGrid[g] >> (8 * j)) & 0xFF); }
inline int iq3s_grid_value(int g, int j) { return static_cast<int>((kIQ3SGrid[g] >> (8 * j)) & 0xFF); }
// Value j (0..7, −1, 0 or +1) of IQ1_S / IQ1_M grid entry g.
inline int iq1s_grid_value(int g, int j) { return static_cast<int8_t>((kIQ1SGrid[g] >> (8 * j)) & 0xFF); }

// kIQSigns[i] as 8 byte masks: byte j is 0xFF where element j is negated, else 0. Computed from
// the rule the table follows (bit 7 = parity of the 7 stored bits); tests check it against kIQSigns.
inline constexpr std::array<uint64_t, 128> kIQSignMasks = [] {
  std::array<uint64_t, 128> t{};
  for (unsigned i = 0; i < 128; ++i) {
    unsigned bits = i, parity = 0;
    for (unsigned b = 0; b < 7; ++b) parity ^= (i >> b) & 1u;
    bits |= parity << 7;
    for (unsigned j = 0; j < 8; ++j)
      if ((bits >> j) & 1u) t[i] |= uint64_t{0xFF} << (8 * j);
  }
  return t;
}();

}  // namespace strata::quant
