// AMX-INT8 kernels of the repacked Q8_0 and Q4_0 types for several activations (prefill and
// verification windows). The layout (cpu/repack/layout.h) already is AMX's B-tile layout: per
// 32-column block, 8 steps of 64 bytes whose 4-byte lane r holds row r's 4 columns of the step, so
// a block of a 16-row group is one 8 x 64 B tile (Q8_0: loaded from the weights as is; Q4_0: its
// nibbles unpacked to a 512-byte buffer first). The A tile is up to 16 activations' 32 bytes of the
// block (loaded from the activations where they are equally spaced, else from a packed copy). One
// TDPBSUD (signed activations x unsigned weights, stored + bias) and one TDPBSSD against a constant
// tile of −bias bytes give the 16 x 16 exact int32 block sums Σ y·(w + bias) − bias·Σy.
//
// Every block has its own scales, so a tile holds one block: the int32 tile is stored and each
// activation's row gets sum += float(isum) · (dx·dy), the multiply and the add rounded separately
// (-ffp-contract=off) in block order: the scalar kernel's arithmetic, so results are bitwise the
// scalar (and AVX-512) path's. Two blocks are in flight at a time (tiles 0-5, the bias tile 6).
//
// Tile state: every call loads its tile configuration (a thread may have had another user of AMX
// since its last call) and releases the tiles at the end, so the pool's workers need no setup.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "strata/cpu/amx/dot_amx.h"
#include "strata/cpu/amx/tile_ops.h"
#include "strata/cpu/avx512/simd_avx512.h"
#include "strata/cpu/repack/layout.h"
#include "strata/cpu/repack/row_groups.h"
#include "strata/quant/blocks.h"

namespace strata::cpu::amx {
namespace {

using avx512::loadu256;
using avx512::loadu512;
using quant::BlockQ8_0;

static_assert(repack::kRows == 16, "a B tile is 16 rows (columns of the tile) wide");
constexpr int kMaxM = 16;               // activations per A tile
constexpr int kBlockQs = quant::kQK32;  // A-tile bytes per activation and block
// Tile registers, two blocks in flight: A 0 / 1, B 2 / 3, C 4 / 5. GCC's tile intrinsics paste the
// register number into the instruction text, so the calls below spell them as literals.
// Tile 6 holds a constant B tile of −bias bytes.
constexpr int kA0 = 0, kA1 = 1, kB0 = 2, kB1 = 3, kC0 = 4, kC1 = 5, kBias = 6;

void configure_tiles(int m) {
  TileConfig c;
  for (int t : {kA0, kA1}) {
    c.rows[t] = static_cast<uint8_t>(m);
    c.colsb[t] = kBlockQs;
  }
  for (int t : {kB0, kB1, kBias}) {
    c.rows[t] = kBlockQs / 4;
    c.colsb[t] = 64;
  }
  for (int t : {kC0, kC1}) {
    c.rows[t] = static_cast<uint8_t>(m);
    c.colsb[t] = 64;
  }
  load_tile_config(c);
}

struct Q8Ops {
  using L = repack::Q8Layout;
  static constexpr int kBias = 128;  // the stored byte is the quant + 128
  static const uint8_t* b_tile(const uint8_t* qs, uint8_t* /*buf*/) { return qs; }
};

// Q4_0_R16: chunk c's low nibbles are step c, its high nibbles step c + 4 (columns 16 + 4c ..).
struct Q4Ops {
  using L = repack::Q4Layout;
  static constexpr int kBias = 8;  // the nibble is the quant + 8
  static const uint8_t* b_tile(const uint8_t* qs, uint8_t* buf) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int c = 0; c < 4; ++c) {
      const __m512i w = loadu512(qs + 64 * c);
      _mm512_store_si512(buf + 64 * c, _mm512_and_si512(w, m4));
      _mm512_store_si512(buf + 64 * (c + 4), _mm512_and_si512(_mm512_srli_epi16(w, 4), m4));
    }
    return buf;
  }
};

// Up to 16 activations prepared once for every row group of a call: where each block's A tile is,
// and per (block, activation) the scale dy.
struct Chunk {
  const uint8_t* a = nullptr;  // block b's A tile at a + b · a_block, rows a_stride apart
  std::size_t a_block = 0, a_stride = 0;
  const float* dy = nullptr;  // [b · 16 + i]
};

// Per thread, grown to the largest call seen (no allocation once warm).
struct Scratch {
  std::vector<uint8_t> packed;
  std::vector<float> dy;
};

Chunk prepare(int64_t nb, const BlockQ8_0* const* y, int m, Scratch& s) {
  const std::size_t cells = static_cast<std::size_t>(nb) * kMaxM;
  if (s.dy.size() < cells) s.dy.resize(cells);
  Chunk ch;
  for (int64_t b = 0; b < nb; ++b)
    for (int i = 0; i < m; ++i) {
      s.dy[b * kMaxM + i] = avx512::fp16(y[i][b].d);
    }
  ch.dy = s.dy.data();
  // Equally spaced activations (a plain batch): the tiles load straight from them.
  const auto* base = reinterpret_cast<const uint8_t*>(y[0]);
  const std::ptrdiff_t step = m > 1 ? reinterpret_cast<const uint8_t*>(y[1]) - base : 0;
  bool even = m == 1 || step > 0;
  for (int i = 2; even && i < m; ++i) even = reinterpret_cast<const uint8_t*>(y[i]) - base == step * i;
  if (even) {
    ch.a = base + offsetof(BlockQ8_0, qs);
    ch.a_block = sizeof(BlockQ8_0);
    ch.a_stride = m > 1 ? static_cast<std::size_t>(step) : sizeof(BlockQ8_0);
    return ch;
  }
  const std::size_t bytes = cells * kBlockQs;
  if (s.packed.size() < bytes) s.packed.resize(bytes);
  for (int64_t b = 0; b < nb; ++b)
    for (int i = 0; i < m; ++i)
      std::memcpy(s.packed.data() + (static_cast<std::size_t>(b) * m + i) * kBlockQs, y[i][b].qs, kBlockQs);
  ch.a = s.packed.data();
  ch.a_block = static_cast<std::size_t>(m) * kBlockQs;
  ch.a_stride = kBlockQs;
  return ch;
}

// acc[i] += float(c[i]) · (dw · dy[i]) for the M activations of one block (c: the tile's sums).
template <int M>
inline void scale_block(__m512* acc, const int32_t* c, __m512 dw, const float* dy) {
  for (int i = 0; i < M; ++i) {
    const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(dy[i]));
    acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * i)), s));
  }
}

// One 16-row group against the chunk's M activations: outs[i][r0 .. r0 + n_valid). Per block
// C = A·B (TDPBSUD) + A·(−bias) (TDPBSSD against the constant tile 6): the exact block sums. Each
// pair's scaling runs one pair later, while the tiles of the next pair compute (the stored sums
// are not read back the moment they are written).
template <typename Ops, int M>
void group_tiles(int64_t nb, const uint8_t* grp, const Chunk& ch, float* const* outs, int64_t r0, int n_valid) {
  using L = typename Ops::L;
  __m512 acc[M];
  for (int i = 0; i < M; ++i) acc[i] = _mm512_setzero_ps();
  alignas(64) int32_t c[2][2][kMaxM * 16];       // [pair parity][block of the pair]
  alignas(64) uint8_t bq0[8 * 64], bq1[8 * 64];  // Q4_0's unpacked nibbles
  const auto stride = static_cast<long>(ch.a_stride);
  auto scale = [&](int64_t b, const int32_t* cb) {
    scale_block<M>(acc, cb, _mm512_cvtph_ps(loadu256(grp + L::d_off(b, nb))),
                   ch.dy + static_cast<std::size_t>(b) * kMaxM);
  };
  int64_t b = 0;
  int p = 0;
  for (; b + 2 <= nb; b += 2, p ^= 1) {
    STRATA_TILE_LOADD(0, ch.a + b * ch.a_block, stride);
    STRATA_TILE_LOADD(2, Ops::b_tile(grp + L::qs_off(b, nb), bq0), 64);
    STRATA_TILE_LOADD(1, ch.a + (b + 1) * ch.a_block, stride);
    STRATA_TILE_LOADD(3, Ops::b_tile(grp + L::qs_off(b + 1, nb), bq1), 64);
    _tile_zero(4);
    _tile_zero(5);
    _tile_dpbsud(4, 0, 2);
    _tile_dpbsud(5, 1, 3);
    _tile_dpbssd(4, 0, 6);
    _tile_dpbssd(5, 1, 6);
    _tile_stored(4, c[p][0], 64);
    _tile_stored(5, c[p][1], 64);
    if (b >= 2) {
      scale(b - 2, c[p ^ 1][0]);
      scale(b - 1, c[p ^ 1][1]);
    }
  }
  if (b >= 2) {
    scale(b - 2, c[p ^ 1][0]);
    scale(b - 1, c[p ^ 1][1]);
  }
  if (b < nb) {
    STRATA_TILE_LOADD(0, ch.a + b * ch.a_block, stride);
    STRATA_TILE_LOADD(2, Ops::b_tile(grp + L::qs_off(b, nb), bq0), 64);
    _tile_zero(4);
    _tile_dpbsud(4, 0, 2);
    _tile_dpbssd(4, 0, 6);
    _tile_stored(4, c[p][0], 64);
    scale(b, c[p][0]);
  }
  for (int i = 0; i < M; ++i) avx512::store_rows(outs[i] + r0, acc[i], n_valid);
}

template <typename Ops, int M>
void chunk_rows(int64_t nb, const uint8_t* w, std::size_t stride, int64_t nrows, const Chunk& ch, float* const* outs) {
  repack::for_each_group(w, stride, nrows,
                         [&](const uint8_t* grp, int64_t r, int nv) { group_tiles<Ops, M>(nb, grp, ch, outs, r, nv); });
}

template <typename Ops>
using ChunkFn = void (*)(int64_t, const uint8_t*, std::size_t, int64_t, const Chunk&, float* const*);

template <typename Ops, int... Ms>
constexpr ChunkFn<Ops> chunk_fn(int m, std::integer_sequence<int, Ms...>) {
  constexpr ChunkFn<Ops> fns[] = {&chunk_rows<Ops, Ms + 1>...};
  return fns[m - 1];
}

// 8 x 64 bytes of −bias (int8: −128 for Q8_0, −8 for Q4_0): the constant B tile whose product with
// the activations adds −bias·Σy to every sum.
template <typename Ops>
const int8_t* bias_tile() {
  struct alignas(64) Tile {
    int8_t v[8 * 64];
  };
  static const Tile t = [] {
    Tile r;
    std::memset(r.v, -Ops::kBias, sizeof r.v);
    return r;
  }();
  return t.v;
}

template <typename Ops>
void rows_multi_tiles(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                      float* const* outs) {
  thread_local Scratch scratch;
  const auto* p = static_cast<const uint8_t*>(w);
  const auto* const* y = reinterpret_cast<const BlockQ8_0* const*>(acts);
  const int64_t nb = n / quant::kQK32;
  int configured = 0;
  for (int a = 0; a < nact; a += kMaxM) {
    const int m = std::min(kMaxM, nact - a);
    const Chunk ch = prepare(nb, y + a, m, scratch);
    if (m != configured) {
      configure_tiles(configured = m);  // zeroes every tile
      STRATA_TILE_LOADD(6, bias_tile<Ops>(), 64);
    }
    chunk_fn<Ops>(m, std::make_integer_sequence<int, kMaxM>{})(nb, p, stride, nrows, ch, outs + a);
  }
  _tile_release();
}

}  // namespace

void dot_rows_multi_q8_0_r16_tiles(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                                   int nact, float* const* outs) {
  rows_multi_tiles<Q8Ops>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_multi_q4_0_r16_tiles(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                                   int nact, float* const* outs) {
  rows_multi_tiles<Q4Ops>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::amx
