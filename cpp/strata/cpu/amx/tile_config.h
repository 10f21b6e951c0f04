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

// LDTILECFG from c. Not _tile_loadconfig: GCC 12 does not see that intrinsic read its operand and
// drops the stores that fill it (dead-store elimination), so the tiles were configured with zero
// rows and the first TILELOADD raised SIGILL (found on an AMX Xeon, 2026-12). The "m" operand makes
// the read visible to the compiler.
inline void load_tile_config(const TileConfig& c) { asm volatile("ldtilecfg %0" : : "m"(c)); }

}  // namespace strata::cpu::amx
