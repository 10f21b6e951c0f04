// The one-time AMX probe (cpu::detect_amx runs it in a child process): 16 x 16 int8 tile products
// (TDPBSUD and TDPBSSD, the two the kernels use) against plain integer sums, on the calling thread
// and on two new threads at once, each configuring its tiles once and using them again after
// sleeping. A first use is not enough: on a Firecracker guest (Linux 6.18, 2026-12) the detection's
// single product passed and the engine's tile kernels then died with SIGILL, so the probe now meets
// what a running kernel meets (threads other than the first, context switches, the VM's exits).
// It then runs the engine's own tile kernels once against the scalar kernel: on that guest the tile
// products passed and the kernels still faulted, because the compiler had emptied their tile
// configuration (tile_ops.h), so only the code that will run can vouch for itself.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "strata/cpu/amx/dot_amx.h"
#include "strata/cpu/amx/tile_ops.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/quant/types.h"

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
  load_tile_config(cfg);
  for (int round = 0; round < kRounds && ok; ++round) {
    for (int rep = 0; rep < kRepeats; ++rep) {
      STRATA_TILE_LOADD(0, a, 64);
      STRATA_TILE_LOADD(1, b, 64);
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

// The Q8_0 and Q4_0 tile kernels on one 32 x 256 matrix, 1 and 16 activations: bitwise the scalar
// kernel of the plain type (their contract, tests/cpp/test_amx.cpp checks it at length).
bool kernels_agree() {
  constexpr int64_t kRows = 32, kCols = 256, kActs = 16;
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  struct Case {
    quant::GGMLType plain;
    DotRowsMultiFn tiles;
  };
  const Case cases[] = {{quant::GGMLType::Q8_0, dot_rows_multi_q8_0_r16_tiles},
                        {quant::GGMLType::Q4_0, dot_rows_multi_q4_0_r16_tiles}};
  for (const Case& c : cases) {
    const std::size_t stride = quant::row_bytes(c.plain, kCols);
    std::vector<uint8_t> w(stride * kRows), wr(w.size());
    for (auto& b : w) b = static_cast<uint8_t>(next() >> 24);
    // Each block's fp16 scale (its first two bytes): 0.0625 .. 0.875.
    for (std::size_t at = 0; at < w.size(); at += quant::type_size(c.plain)) {
      const uint16_t d = static_cast<uint16_t>(0x2C00 + ((next() >> 28) << 8));
      std::memcpy(w.data() + at, &d, sizeof d);
    }
    repack_rows(c.plain, w.data(), kRows, kCols, wr.data());
    const DotKernel& ref = dot_kernel(c.plain, Isa::Scalar);
    const std::size_t ab = activation_row_bytes(c.plain, kCols);
    std::vector<float> x(kCols);
    std::vector<uint8_t> act(ab * kActs);
    std::vector<float> want(kRows * kActs), got(kRows * kActs);
    const void* acts[kActs];
    float* outs[kActs];
    for (int a = 0; a < kActs; ++a) {
      for (auto& v : x) v = static_cast<float>(static_cast<int>(next() >> 20) - 2048) / 512.0f;
      ref.quantize_act(x.data(), act.data() + a * ab, kCols);
      ref.dot_rows(kCols, w.data(), stride, kRows, act.data() + a * ab, want.data() + a * kRows);
      acts[a] = act.data() + a * ab;
      outs[a] = got.data() + a * kRows;
    }
    for (int nact : {1, static_cast<int>(kActs)}) {
      c.tiles(kCols, wr.data(), stride, kRows, acts, nact, outs);
      if (std::memcmp(got.data(), want.data(), sizeof(float) * kRows * nact) != 0) return false;
    }
  }
  return true;
}

}  // namespace

bool probe_tiles() {
  bool ok1 = false, ok2 = false;
  std::thread t1([&ok1] { ok1 = tile_rounds(); });
  std::thread t2([&ok2] { ok2 = tile_rounds(); });
  const bool ok0 = tile_rounds();
  t1.join();
  t2.join();
  return ok0 && ok1 && ok2 && kernels_agree();
}

}  // namespace strata::cpu::amx
