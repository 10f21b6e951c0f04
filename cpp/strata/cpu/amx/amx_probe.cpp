// The one-time AMX probe (cpu::detect_amx runs it in a child process): 16 x 16 int8 tile products
// (TDPBSUD and TDPBSSD, the two the kernels use) against plain integer sums, on the calling thread
// and on two new threads at once, each configuring its tiles once and using them again after
// sleeping. A first use is not enough: on a Firecracker guest (Linux 6.18, 2026-12) the detection's
// single product passed and the engine's tile kernels then died with SIGILL, so the probe now meets
// what a running kernel meets (threads other than the first, context switches, the VM's exits).
#include <immintrin.h>

#include <cstdint>
#include <ctime>
#include <thread>

#include "strata/cpu/amx/dot_amx.h"
#include "strata/cpu/amx/tile_config.h"

namespace strata::cpu::amx {
namespace {

// Rounds of tile work on one thread, configured once, a short sleep between rounds (~2 ms in all).
bool tile_rounds() {
  TileConfig cfg;
  for (int t = 0; t < 4; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  alignas(64) int8_t a[16][64];
  alignas(64) uint8_t b[16][64];
  alignas(64) int32_t c_su[16][16], c_ss[16][16];
  int32_t want_su[16][16], want_ss[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 64; ++j) {
      a[i][j] = static_cast<int8_t>((i * 37 + j * 11) % 256 - 128);
      b[i][j] = static_cast<uint8_t>((i * 13 + j * 29 + 7) % 256);
    }
  // want[m][n] = sum over k < 16, i < 4 of a[m][4k + i] * b[k][4n + i], b unsigned (SU) or signed (SS).
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      int32_t su = 0, ss = 0;
      for (int k = 0; k < 16; ++k)
        for (int i = 0; i < 4; ++i) {
          su += a[m][4 * k + i] * b[k][4 * n + i];
          ss += a[m][4 * k + i] * static_cast<int8_t>(b[k][4 * n + i]);
        }
      want_su[m][n] = su;
      want_ss[m][n] = ss;
    }
  constexpr int kRounds = 8, kRepeats = 64;
  const timespec pause{0, 250'000};
  bool ok = true;
  _tile_loadconfig(&cfg);
  for (int round = 0; round < kRounds && ok; ++round) {
    for (int rep = 0; rep < kRepeats; ++rep) {
      _tile_loadd(0, a, 64);
      _tile_loadd(1, b, 64);
      _tile_zero(2);
      _tile_zero(3);
      _tile_dpbsud(2, 0, 1);
      _tile_dpbssd(3, 0, 1);
      _tile_stored(2, c_su, 64);
      _tile_stored(3, c_ss, 64);
    }
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n)
        if (c_su[m][n] != want_su[m][n] || c_ss[m][n] != want_ss[m][n]) ok = false;
    nanosleep(&pause, nullptr);
  }
  _tile_release();
  return ok;
}

}  // namespace

bool probe_tiles() {
  bool ok1 = false, ok2 = false;
  std::thread t1([&ok1] { ok1 = tile_rounds(); });
  std::thread t2([&ok2] { ok2 = tile_rounds(); });
  const bool ok0 = tile_rounds();
  t1.join();
  t2.join();
  return ok0 && ok1 && ok2;
}

}  // namespace strata::cpu::amx
