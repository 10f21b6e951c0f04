#pragma once
// The 64-byte operand of LDTILECFG (palette 1): bytes per row and rows of each of the 16 tile
// registers; registers left at zero are unused. Shared by the kernels and the probe of cpu/amx.
#include <cstdint>

namespace strata::cpu::amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

}  // namespace strata::cpu::amx
