// The one-time AMX probe (cpu::detect_amx runs it under a SIGILL guard): configure three tiles, one
// TDPBSUD of a 16 x 64 signed tile by a 16 x 64 unsigned one, compare with plain integer sums.
#include <immintrin.h>

#include <cstdint>

#include "strata/cpu/amx/dot_amx.h"

namespace strata::cpu::amx {

bool probe_tiles() {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 3; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  alignas(64) int8_t a[16][64];
  alignas(64) uint8_t b[16][64];
  alignas(64) int32_t c[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 64; ++j) {
      a[i][j] = static_cast<int8_t>((i * 37 + j * 11) % 256 - 128);
      b[i][j] = static_cast<uint8_t>((i * 13 + j * 29 + 7) % 256);
    }
  _tile_loadconfig(&cfg);
  _tile_loadd(0, a, 64);
  _tile_loadd(1, b, 64);
  _tile_zero(2);
  _tile_dpbsud(2, 0, 1);
  _tile_stored(2, c, 64);
  _tile_release();
  // c[m][n] = sum over k < 16, i < 4 of a[m][4k + i] * b[k][4n + i].
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      int32_t want = 0;
      for (int k = 0; k < 16; ++k)
        for (int i = 0; i < 4; ++i) want += a[m][4 * k + i] * b[k][4 * n + i];
      if (c[m][n] != want) return false;
    }
  return true;
}

}  // namespace strata::cpu::amx
