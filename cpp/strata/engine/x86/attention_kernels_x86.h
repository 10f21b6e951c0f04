#pragma once
// The 8-lane attention kernels of engine/attention_kernels.h, shared by the AVX2 table (16 ymm
// registers: score passes of four query heads over two cells at a time, or of up to three over four
// cells) and the AVX-512 table's f32 entries (compiled with -mavx512vl, the same arithmetic gets 32 ymm
// registers: passes of four heads over four cells). Either way a GQA group of four reads each K and V
// line once. Bitwise equal to the portable kernels: the lanes, the reduction tree and the per-block /
// per-cell operations are vec_dot.h's and kv_quant.h's: multiplies and adds kept separate for int8 cells
// and the indexer (the including file turns fp-contract off), fused multiply-adds for f32 and fp16 cells
// (dot_f32_fused / axpy_f32_fused). What changes is the shape of the work: a batch of cells is converted
// once for all the pass's query heads, their 8-lane dot sums are reduced four at a time by one hadd tree,
// and a softmax chunk's value sums stay in registers across its cells. Internal linkage: each ISA file
// gets its own copy, compiled with its own flags, and the linker can never hand one file's code to the
// other.
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "strata/engine/attention_kernels.h"
#include "strata/engine/kv_quant.h"
#include "strata/engine/x86/lanes8.h"
#include "strata/util/fp16.h"

namespace strata::engine::x86 {
namespace {

// The loops over heads, cells and registers are unrolled at every optimisation level (-O2 kept
// the accumulator arrays on the stack otherwise).

constexpr int kCells = 4;  // cells whose dots one hadd tree reduces

// Software prefetch of f32 and fp16 cells (a prefetch never changes a result): the score kernels ask for the
// K rows of the cells kPrefetchCells list entries past the batch (the next batch of four, or the batch of
// two after the next; batches of three ask for the batch after the next, six entries on). A decode step's streamed
// expert weights evict the KV cells from every cache level, and f32 rows (Dh 128: 512 bytes, 8 lines per cell) outrun
// the hardware prefetchers: on Zen 4 this halves a cold f32 group's time (docs/benchmarks.md, "Attention core"). int8
// rows (128 bytes at Dh 128) are left to the hardware, which keeps up: prefetching them measured slower. V rows: the
// 8-lane kernels ask for them through RowsAhead below, the 16-lane AVX-512 kernels as kPrefetchValuesMaxBytes says.
constexpr int kPrefetchCells = 4;
// The 16-lane AVX-512 score kernels also ask for the same cells' V rows when a head's V rows fill at most a quarter
// of a Zen 4 L2 (256 KiB: Dh 128 and up to 512 f32 or 1024 fp16 cells), so the value pass that follows finds them in
// cache instead of starting cold; the two streams overlap. Zen 4, `attention_core_bench`, cold f32
// group of 144 cells: 20-24 -> 15.4-18.6 us (min of 3, five alternated invocations); at 1024 cells
// the V rows (512 KiB) gained nothing reliable and are left out; warm groups run 3-6 % slower (the
// extra prefetch instructions), a case decode does not meet.
constexpr int64_t kPrefetchValuesMaxBytes = int64_t{256} * 1024;

// Asks for the cache lines of bytes [p, p + bytes) towards L1.
inline void prefetch_span(const void* p, int64_t bytes) {
  auto a = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes);
  for (; a < end; a += 64) _mm_prefetch(reinterpret_cast<const char*>(a), _MM_HINT_T0);
}

// Whether the 16-lane AVX-512 score kernels also ask for a head's V rows: while they fit kPrefetchValuesMaxBytes.
inline bool ask_values_too(const void* vals, int64_t n, int64_t row_bytes) {
  return vals != nullptr && n * row_bytes <= kPrefetchValuesMaxBytes;
}

// Asks for the K rows, and the V rows when ask_v, of list entries [j0, j1) (cells == nullptr: entry
// j is cell j).
template <typename T>
inline void prefetch_rows(const T* keys, const T* vals, bool ask_v, const int32_t* cells, int64_t j0, int64_t j1,
                          int dh) {
  const int64_t row_bytes = int64_t{sizeof(T)} * dh;
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t cell = cells ? cells[j] : j;
    prefetch_span(keys + cell * dh, row_bytes);
    if (ask_v) prefetch_span(vals + cell * dh, row_bytes);
  }
}

template <typename T>
const T* values_of(const KvHeadData& h) {
  if constexpr (std::is_same_v<T, int8_t>)
    return h.v8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return h.vh;
  else
    return h.vf;
}

// The V rows of the list entries KvHeadData::ahead_* asks for, one cache line at a time spread evenly over a
// kernel's `steps` calls of step(). On an AMD EPYC Zen 3 the score kernels' old prefetch of each cell's V row
// four cells ahead (a row's four lines at once, next to the K rows') was dropped: a burst of prefetches finds
// the core's miss buffers full, and a dropped prefetch is not retried, so the value pass read its rows from
// memory as if nothing had asked for them (a decode group of 544 fp16 cells: values 24-25 us, 16 once the
// rows were loaded). One line per step or two keeps the buffers from filling: values 17.5 us, decode 4-6 %
// faster after a 512-token prompt (docs/benchmarks.md, "Result, session 41"). Asking for lines already in
// cache is not free (a warm 1024-cell group's values 30-50 % slower), so callers ask only for rows no call has
// just read. int8 rows: none (the hardware prefetchers keep up with them, see kPrefetchCells).
template <typename T>
class RowsAhead {
 public:
  RowsAhead(const KvHeadData& h, const int32_t* cells, int64_t steps)
      : base_(reinterpret_cast<const char*>(values_of<T>(h))),
        cells_(cells),
        j_(h.ahead_begin),
        end_(std::is_same_v<T, int8_t> || steps <= 0 || !base_ ? h.ahead_begin : h.ahead_begin + h.ahead_n),
        row_bytes_(int64_t{sizeof(T)} * h.dh) {
    if (j_ >= end_) return;
    // Lines per row: one more where rows do not start on a line (they then straddle it).
    const int64_t lines = (end_ - j_) * ((row_bytes_ + 63) / 64 + (row_bytes_ % 64 != 0));
    per_step_ = static_cast<int>(std::max<int64_t>(1, (lines + steps - 1) / steps));
    every_ = static_cast<int>(std::max<int64_t>(1, steps / lines));
    count_ = every_;
    start_row();
  }
  // One line (or a few, when the rows have more lines than the kernel has steps) every every_-th call.
  [[gnu::always_inline]] void step() {
    if constexpr (std::is_same_v<T, int8_t>) return;  // nothing asked: no work in the int8 kernels' loops
    if (--count_ > 0) return;
    count_ = every_;
    for (int k = 0; k < per_step_; ++k) {
      if (line_ >= row_end_) {
        if (cells_ == nullptr || ++j_ >= end_) {  // the implicit list's rows are one range
          count_ = std::numeric_limits<int>::max();
          return;
        }
        start_row();
      }
      _mm_prefetch(line_, _MM_HINT_T0);
      line_ += 64;
    }
  }

 private:
  void start_row() {
    // The implicit list's rows [j_, end_) lie end to end: one range.
    const char* row = base_ + (cells_ ? cells_[j_] : j_) * row_bytes_;
    line_ = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(row) & ~uintptr_t{63});
    row_end_ = row + (cells_ ? row_bytes_ : (end_ - j_) * row_bytes_);
  }
  const char* base_;
  const int32_t* cells_;
  int64_t j_, end_, row_bytes_;
  int per_step_ = 0, every_ = 0, count_ = std::numeric_limits<int>::max();
  const char* line_ = nullptr;
  const char* row_end_ = nullptr;
};

template <int N>
using Int = std::integral_constant<int, N>;

// acc + a·b as the cells of type T are summed: one multiply, then one add (int8 cells, the indexer)
// or one fused multiply-add (f32 / fp16 cells: vec_dot.h's *_fused order).
template <typename T>
inline constexpr bool kFused = !std::is_same_v<T, int8_t>;
template <bool Fused>
inline __m256 mul_add(__m256 acc, __m256 a, __m256 b) {
  if constexpr (Fused)
    return _mm256_fmadd_ps(a, b, acc);
  else
    return _mm256_add_ps(acc, _mm256_mul_ps(a, b));
}
template <bool Fused>
inline float mul_add(float acc, float a, float b) {
  if constexpr (Fused) {
    return std::fma(a, b, acc);
  } else {
    const float p = a * b;
    return acc + p;
  }
}

// f(Int<g>{}) for g = min(gs, MaxG) in 1..4 (MaxG <= 4): the head count of one pass as a constant.
template <int MaxG, typename F>
inline void with_heads(int gs, F&& f) {
  static_assert(MaxG >= 1 && MaxG <= 4);
  if constexpr (MaxG >= 4)
    if (gs >= 4) return f(Int<4>{});
  if constexpr (MaxG >= 3)
    if (gs >= 3) return f(Int<3>{});
  if constexpr (MaxG >= 2)
    if (gs >= 2) return f(Int<2>{});
  f(Int<1>{});
}

// uint16_t elements are fp16 cells (F16C's conversion is exact, as fp16_to_fp32's).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline __m256 load8(const int8_t* q) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

// Elements [0, t) of p (t < 8), zeros above; never reads past p + t.
inline __m256 load_tail(const float* p, int, __m256i mask) { return _mm256_maskload_ps(p, mask); }
inline __m256 load_tail(const int8_t* p, int t, __m256i) {
  int8_t buf[8] = {};
  std::memcpy(buf, p, static_cast<std::size_t>(t));
  return load8(buf);
}
inline __m256 load_tail(const uint16_t* p, int t, __m256i) {
  uint16_t buf[8] = {};
  std::memcpy(buf, p, sizeof(uint16_t) * static_cast<std::size_t>(t));
  return load8(buf);
}

inline float to_float(float x) { return x; }
inline float to_float(int8_t x) { return static_cast<float>(x); }
inline float to_float(uint16_t x) { return fp16_to_fp32(x); }

// Lane c = ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) of a_c: hadd(a0, a1) holds a0's and a1's pair sums,
// the second hadd their quad sums (low 128 bits: lanes 0-3, high: lanes 4-7), the add the total.
inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// One 8-column step of dots4: the G query chunks against each of the C cells' chunk, added
// into the cell's accumulators (multiply, then add: the documented order; Fused: one fused
// multiply-add, the f32 / fp16 cells' order).
template <int G, bool Fused, int C = kCells>
inline void add_step(const __m256* qv, const __m256* kv, __m256 (*acc)[G]) {
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[c][g] = mul_add<Fused>(acc[c][g], qv[g], kv[c]);
}

// The 8 columns from `at` of the G query chunks and the C cells, added into the accumulators.
template <typename T, int G, bool Fused, int C = kCells>
inline void step_at(const float* const* q, const T* const* k, int64_t at, __m256 (*acc)[G]) {
  __m256 qv[G], kv[C];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) qv[g] = _mm256_loadu_ps(q[g] + at);
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) kv[c] = load8(k[c] + at);
  add_step<G, Fused, C>(qv, kv, acc);
}

template <int G, int C = kCells>
inline void zero_acc(__m256 (*acc)[G]) {
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) acc[c][g] = _mm256_setzero_ps();
}

// The dot sums, one hadd tree per four of them (each lane's tree is the same whichever four share it).
// C = 4: out[g] holds head g's four cells. C = 2 (pairs of heads, G even): out[p] holds cells 0 and 1 of
// head 2p, then cells 0 and 1 of head 2p + 1.
template <int G, int C = kCells>
inline void reduce_acc(__m256 (*acc)[G], __m128* out) {
  static_assert(C == kCells || (C == 2 && G % 2 == 0));
  if constexpr (C == kCells) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) out[g] = reduce4(acc[0][g], acc[1][g], acc[2][g], acc[3][g]);
  } else {
#pragma GCC unroll 16
    for (int p = 0; p < G / 2; ++p)
      out[p] = reduce4(acc[0][2 * p], acc[1][2 * p], acc[0][2 * p + 1], acc[1][2 * p + 1]);
  }
}

// Each dot (with C = 4, lane c of out[g]; with C = 2, reduce_acc's pairs) = vec_dot.h's dot of
// q[g][o, o+len) with k[c][o, o+len): 8 interleaved sums,
// the tail continuing lanes 0, 1, ... (the other lanes get +0 products, which leave them unchanged:
// a sum that starts at +0 is never −0).
// The common lengths (a whole int8 block of 64, the indexer's 32, an f32 head of 128) with the chunk
// count fixed: the accumulators then stay in registers (the general form below keeps a copy on the
// stack for its tail).
template <typename T, int G, bool Fused, int NCH, int C>
inline void dots4_fixed(const float* const* q, const T* const* k, int64_t o, __m128* out) {
  __m256 acc[C][G];
  zero_acc<G, C>(acc);
  for (int j = 0; j < 8 * NCH; j += 8) step_at<T, G, Fused, C>(q, k, o + j, acc);
  reduce_acc<G, C>(acc, out);
}

template <typename T, int G, bool Fused, int C>
inline void dots4_any(const float* const* q, const T* const* k, int64_t o, int len, __m128* out) {
  __m256 acc[C][G];
  zero_acc<G, C>(acc);
  int j = 0;
  for (; j + 8 <= len; j += 8) step_at<T, G, Fused, C>(q, k, o + j, acc);
  if (j < len) {
    const int t = len - j;
    const __m256i m = tail_mask(t);
    __m256 qv[G], kv[C];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) qv[g] = _mm256_maskload_ps(q[g] + o + j, m);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) kv[c] = load_tail(k[c] + o + j, t, m);
    add_step<G, Fused, C>(qv, kv, acc);
  }
  reduce_acc<G, C>(acc, out);
}

// The dots of G query chunks with C = 4 cells (out[g]: head g) or C = 2 cells (reduce_acc's pairs).
template <typename T, int G, bool Fused, int C = kCells>
inline void dots4(const float* const* q, const T* const* k, int64_t o, int len, __m128* out) {
  switch (len) {
    case 32: dots4_fixed<T, G, Fused, 4, C>(q, k, o, out); return;
    case 64: dots4_fixed<T, G, Fused, 8, C>(q, k, o, out); return;
    case 128: dots4_fixed<T, G, Fused, 16, C>(q, k, o, out); return;
    default: dots4_any<T, G, Fused, C>(q, k, o, len, out); return;
  }
}

// The C cells from list entry i on; past n the last one repeats (computed, never stored).
template <int C = kCells>
inline void batch_cells(const int32_t* cells, int64_t i, int64_t n, int64_t* c) {
  for (int j = 0; j < C; ++j) {
    const int64_t e = std::min(i + j, n - 1);
    c[j] = cells ? cells[e] : e;
  }
}

inline void store4(__m128 v, float* p, int64_t cnt) {
  if (cnt >= kCells) {
    _mm_storeu_ps(p, v);
    return;
  }
  alignas(16) float t[kCells];
  _mm_store_ps(t, v);
  for (int64_t j = 0; j < cnt; ++j) p[j] = t[j];
}

// A pair of heads' scores of two cells (reduce_acc's C = 2 lanes): lanes 0-1 to p0, 2-3 to p1; cnt = 1
// stores only each head's first.
inline void store_pair(__m128 v, float* p0, float* p1, int64_t cnt) {
  alignas(16) float t[4];
  _mm_store_ps(t, v);
  p0[0] = t[0];
  p1[0] = t[2];
  if (cnt >= 2) {
    p0[1] = t[1];
    p1[1] = t[3];
  }
}

// fp16 → f32 is exact, so F16C's conversion equals fp16_to_fp32 (util/fp16.h) for every scale
// kv_quantize can write (finite or +inf; it never writes a NaN).
// C = 4: the scales of cells c[0..3] in lanes 0-3; C = 2: cells c[0], c[1], c[0], c[1] (reduce_acc's pairs).
template <int C = kCells>
inline __m128 scales4(const uint16_t* s, const int64_t* c, int64_t stride) {
  const auto at = [&](int j) { return static_cast<short>(s[c[j % C] * stride]); };
  return _mm_cvtph_ps(_mm_setr_epi16(at(0), at(1), at(2), at(3), 0, 0, 0, 0));
}

// The G heads' scores of the C cells whose sums `v` holds (reduce_acc's lanes) divided by sqrt(Dh), stored
// at list entry i of each head's row.
template <int G, int C>
inline void store_scores(const __m128* v, __m128 vsq, float* scores, int64_t stride, int64_t i, int64_t n) {
  if constexpr (C == kCells) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) store4(_mm_div_ps(v[g], vsq), scores + g * stride + i, n - i);
  } else {
#pragma GCC unroll 16
    for (int p = 0; p < G / 2; ++p)
      store_pair(_mm_div_ps(v[p], vsq), scores + 2 * p * stride + i, scores + (2 * p + 1) * stride + i, n - i);
  }
}

// Sums per pass: G with four cells, G / 2 with two.
template <int G, int C>
inline constexpr int kSums = C == kCells ? G : G / 2;

template <int G, int C>
void scores_i8_g(const KvHeadData& h, const float* const* q, const int32_t* cells, int64_t n, float sqrt_dh,
                 float* scores, int64_t stride) {
  const int dh = h.dh;
  const int64_t nb = kv_blocks(dh);
  const __m128 vsq = _mm_set1_ps(sqrt_dh);
  constexpr int S = kSums<G, C>;
  for (int64_t i = 0; i < n; i += C) {
    int64_t c[C];
    batch_cells<C>(cells, i, n, c);
    const int8_t* k[C];
    for (int j = 0; j < C; ++j) k[j] = h.k8 + c[j] * dh;
    __m128 tot[S];
#pragma GCC unroll 16
    for (int g = 0; g < S; ++g) tot[g] = _mm_setzero_ps();
    for (int b0 = 0, b = 0; b0 < dh; b0 += kKvBlock, ++b) {
      __m128 part[S];
      dots4<int8_t, G, /*Fused=*/false, C>(q, k, b0, std::min(dh - b0, kKvBlock), part);
      const __m128 s = scales4<C>(h.ks + b, c, nb);
#pragma GCC unroll 16
      for (int g = 0; g < S; ++g) tot[g] = _mm_add_ps(tot[g], _mm_mul_ps(part[g], s));
    }
    store_scores<G, C>(tot, vsq, scores, stride, i, n);
  }
}

template <typename T>
const T* keys_of(const KvHeadData& h) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return h.kh;
  else
    return h.kf;
}

// The dots of four heads with three cells (scores_f_g's C = 3) with 16 registers (Regs): twelve accumulator chains,
// enough to hide the fused multiply-add's latency, each query chunk read from L1 by its multiply-add instead of held in
// a register (four query registers would leave room for eight chains only, head_passes' pairs of cells). Same sums and
// hadd trees as dots4 (each lane's tree is the same whichever four share it), so the same bits. Dh a multiple of 8. On
// an AMD EPYC Zen 3 (attention_core_bench, warm, Dh 128, min of 12 alternated runs) 1024 fp16 cells took 19.7 us
// against 23.2 for head_passes' pairs, 144 cells 2.95 against 3.52, and 1024 f32 cells 22.8 against 24.3.
template <typename T>
inline void dots_4x3(const float* const* q, const T* const* k, int dh, __m128 vsq, __m128* sc) {
  constexpr int C = 3;
  __m256 acc[C][4];
  zero_acc<4, C>(acc);
  for (int j = 0; j < dh; j += 8) {
    __m256 kv[C];
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) kv[c] = load8(k[c] + j);
    // The query chunks as the multiply-adds' memory operands, not registers.
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
      for (int g = 0; g < 4; ++g) acc[c][g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + j), kv[c], acc[c][g]);
  }
  // Lane g of sc[c]: head g's score of cell c.
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) sc[c] = _mm_div_ps(reduce4(acc[c][0], acc[c][1], acc[c][2], acc[c][3]), vsq);
}

// f32 or fp16 (T = uint16_t) cells: the same dots on the converted values. C = 3 (G = 4): dots_4x3.
// The K rows asked for are those of the batch kPrefetchCells entries on, rounded up to whole batches.
template <typename T, int G, int C>
void scores_f_g(const KvHeadData& h, const float* const* q, const int32_t* cells, int64_t n, float sqrt_dh,
                float* scores, int64_t stride, bool ask_ahead) {
  const int dh = h.dh;
  const __m128 vsq = _mm_set1_ps(sqrt_dh);
  const T* keys = keys_of<T>(h);
  RowsAhead<T> v_ahead(h, cells, ask_ahead ? (n + C - 1) / C : 0);
  for (int64_t i = 0; i < n; i += C) {
    int64_t c[C];
    batch_cells<C>(cells, i, n, c);
    const T* k[C];
    for (int j = 0; j < C; ++j) k[j] = keys + c[j] * dh;
    if (ask_ahead) {
      constexpr int64_t ahead = (kPrefetchCells + C - 1) / C * C;
      prefetch_rows<T>(keys, nullptr, false, cells, i + ahead, std::min(n, i + ahead + C), dh);
      v_ahead.step();
    }
    if constexpr (C == 3) {
      static_assert(G == 4);
      __m128 sc[C];
      dots_4x3<T>(q, k, dh, vsq, sc);
      for (int64_t j = 0; j < std::min<int64_t>(C, n - i); ++j) {
        alignas(16) float t[4];
        _mm_store_ps(t, sc[j]);
        for (int g = 0; g < 4; ++g) scores[g * stride + i + j] = t[g];
      }
    } else {
      __m128 part[kSums<G, C>];
      dots4<T, G, /*Fused=*/true, C>(q, k, 0, dh, part);
      store_scores<G, C>(part, vsq, scores, stride, i, n);
    }
  }
}

// The score passes over a group of G heads (each head's scores and outputs are independent of the
// others'); only the first pass prefetches, the later ones find the cells in cache. With 32 registers
// (Regs) passes of up to four heads over four cells. With 16, four cells' dots take 4·G accumulators, so
// such a pass covers at most three heads, and a GQA group of four read every K line twice (a pass of
// three, then one of a single head: four accumulator chains, too few to hide the fused multiply-add's
// latency); there whole fours of heads run first, over two cells at a time (eight accumulators), every K
// line read and converted once for the four. On an AMD EPYC Zen 3 (attention_core_bench, a warm group
// of 1024 fp16 cells, Dh 128) the scores took 21.4-22.0 us against 23.6-24.4. The f32 and fp16 scores
// now take fours of heads three cells at a time (scores_f_g with C = 3, dots_4x3: faster again); the pairs remain for
// the int8 scores and for a Dh that is not a multiple of 8. The most heads a pass over four cells holds with Regs
// registers (its 4·G accumulators, G query chunks and four cells' chunks): the score passes below and the indexer's.
template <int Regs>
inline constexpr int kFourCellHeads = Regs < 32 ? 3 : 4;

template <int Regs, typename Pass>
inline void head_passes(int G, Pass&& pass) {
  int g0 = 0;
  constexpr int MaxG = kFourCellHeads<Regs>;
  if constexpr (MaxG < 4)
    for (; G - g0 >= 4; g0 += 4) pass(g0, Int<4>{}, Int<2>{});
  for (; g0 < G; g0 += MaxG) with_heads<MaxG>(G - g0, [&](auto gs) { pass(g0, gs, Int<kCells>{}); });
}

template <int Regs>
void scores_i8(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
               float* scores, int64_t stride) {
  head_passes<Regs>(G, [&](int g0, auto gs, auto c) {
    scores_i8_g<gs.value, c.value>(h, q + g0, cells, n, sqrt_dh, scores + g0 * stride, stride);
  });
}

template <typename T, int Regs>
void scores_f(const KvHeadData& h, const float* const* q, int G, const int32_t* cells, int64_t n, float sqrt_dh,
              float* scores, int64_t stride) {
  int g0 = 0;
  if constexpr (kFourCellHeads<Regs> < 4)
    if (h.dh % 8 == 0)
      for (; G - g0 >= 4; g0 += 4)
        scores_f_g<T, 4, 3>(h, q + g0, cells, n, sqrt_dh, scores + g0 * stride, stride, g0 == 0);
  q += g0;
  scores += g0 * stride;
  const bool first = g0 == 0;
  head_passes<Regs>(G - g0, [&](int g1, auto gs, auto c) {
    scores_f_g<T, gs.value, c.value>(h, q + g1, cells, n, sqrt_dh, scores + g1 * stride, stride, first && g1 == 0);
  });
}

// Cells per piece of the value kernels: the weights of a piece fit a stack buffer.
constexpr int kPiece = 64;

// Cells a value slab takes per step: two with more than one head, one with a single head (two cells there
// spilled its eight registers of sums: 1.05-1.13x the time, Zen 3 warm). With 16 registers G 2 and 3 keep some
// sums on the stack when they take two cells, and still measured faster than with one (one cell a step took
// 0.86-1.17x the time for fp16 and int8 cells, 1.0-1.6x for f32).
template <int G>
constexpr int slab_step() {
  return G > 1 ? 2 : 1;
}

// Columns [col, col + 8·NV) of the G outputs, summed in registers over the cells of a piece: per
// element and cell one multiply and one add, cells in order; from +0 on the first piece (the memset
// then axpy of the per-cell form), from the stored sums after it. w[g·kPiece + i] is cell i's weight.
// rows[i]: the piece's cell i (looked up once per piece, not per slab). Each step of one or two cells
// also steps `ahead` (the next chunk's rows). Against one cell a step with the row found per slab
// (Zen 3, attention_core_bench, warm, Dh 128, G 4, min of 40 alternations in one process): 1024 fp16
// cells 24.1 -> 20.0 us, f32 30.8 -> 21.4, int8 26.6 -> 25.1.
template <typename T, int G, int NV>
void values_slab(const T* const* rows, const float* w, int64_t n, int col, bool first, float* const* co,
                 RowsAhead<T>& ahead) {
  __m256 acc[G][NV];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[g][v] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(co[g] + col + 8 * v);
  int64_t i = 0;
  // Two cells a step (slab_step), their loads and conversions overlapping; each sum still takes
  // cell i, then cell i + 1.
  if constexpr (slab_step<G>() == 2) {
    for (; i + 2 <= n; i += 2) {
      const T* x0 = rows[i] + col;
      const T* x1 = rows[i + 1] + col;
      ahead.step();
      __m256 xv0[NV], xv1[NV];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) {
        xv0[v] = load8(x0 + 8 * v);
        xv1[v] = load8(x1 + 8 * v);
      }
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) {
        const __m256 w0 = _mm256_broadcast_ss(w + g * kPiece + i);
        const __m256 w1 = _mm256_broadcast_ss(w + g * kPiece + i + 1);
#pragma GCC unroll 16
        for (int v = 0; v < NV; ++v)
          acc[g][v] = mul_add<kFused<T>>(mul_add<kFused<T>>(acc[g][v], w0, xv0[v]), w1, xv1[v]);
      }
    }
  }
  for (; i < n; ++i) {
    const T* x = rows[i] + col;
    ahead.step();
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const __m256 xv = load8(x + 8 * v);
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g)
        acc[g][v] = mul_add<kFused<T>>(acc[g][v], _mm256_broadcast_ss(w + g * kPiece + i), xv);
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(co[g] + col + 8 * v, acc[g][v]);
}

// 8-column registers per value slab with G heads: the widest power of two up to 8 whose G·NV
// accumulators leave room for a value, a weight and the compiler's temporaries (Regs: 16 or 32).
template <int G, int Regs>
constexpr int slab_width() {
  int nv = 8;
  while (nv > 1 && G * nv > Regs - 4) nv /= 2;
  return nv;
}

// Columns [c0, c1) of one scale block: slabs as wide as the registers allow, then single columns
// for the Dh % 8 past the last full 8.
template <typename T, int G, int Regs>
void values_cols(const T* const* rows, const float* w, int64_t n, int c0, int c1, bool first, RowsAhead<T>& ahead,
                 float* const* co) {
  constexpr int NV = slab_width<G, Regs>();
  int col = c0;
  for (; col + 8 * NV <= c1; col += 8 * NV) values_slab<T, G, NV>(rows, w, n, col, first, co, ahead);
  for (; col + 8 <= c1; col += 8) values_slab<T, G, 1>(rows, w, n, col, first, co, ahead);
  for (; col < c1; ++col)
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      float a = first ? 0.0f : co[g][col];
      for (int64_t i = 0; i < n; ++i) a = mul_add<kFused<T>>(a, w[g * kPiece + i], to_float(rows[i][col]));
      co[g][col] = a;
    }
}

// Pieces of kPiece cells; per piece and scale block the weights w·scale (int8: kv_axpy's per-block
// weight) or w (f32) are formed once.
template <typename T, int G, int Regs>
void values_g(const KvHeadData& h, const float* e, int64_t es, const int32_t* cells, int64_t n, float* const* co,
              bool ask_ahead) {
  const int dh = h.dh;
  const T* base = values_of<T>(h);
  // The slab steps of the whole call (the columns past the last 8 do not step): the next chunk's rows are
  // asked for across all of them.
  constexpr int NV = slab_width<G, Regs>(), Step = slab_step<G>();
  const int64_t slabs = dh / (8 * NV) + dh % (8 * NV) / 8;
  RowsAhead<T> ahead(h, cells, ask_ahead ? (n + Step - 1) / Step * slabs : 0);
  alignas(32) float w[G * kPiece];
  const T* rows[kPiece];  // the piece's rows, looked up once for all its slabs
  for (int64_t p0 = 0; p0 < n; p0 += kPiece) {
    const int64_t pn = std::min<int64_t>(kPiece, n - p0);
    const int32_t* pc = cells ? cells + p0 : nullptr;
    for (int64_t i = 0; i < pn; ++i) rows[i] = base + (pc ? pc[i] : p0 + i) * dh;
    if constexpr (std::is_same_v<T, int8_t>) {
      const int64_t nb = kv_blocks(dh);
      const uint16_t* vs = cells ? h.vs : h.vs + p0 * nb;
      for (int b0 = 0, b = 0; b0 < dh; b0 += kKvBlock, ++b) {
        for (int64_t i = 0; i < pn; ++i) {
          const float s = fp16_to_fp32(vs[(pc ? pc[i] : i) * nb + b]);
#pragma GCC unroll 16
          for (int g = 0; g < G; ++g) w[g * kPiece + i] = e[g * es + p0 + i] * s;
        }
        values_cols<T, G, Regs>(rows, w, pn, b0, std::min(dh, b0 + kKvBlock), p0 == 0, ahead, co);
      }
    } else {
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g)
        for (int64_t i = 0; i < pn; ++i) w[g * kPiece + i] = e[g * es + p0 + i];
      values_cols<T, G, Regs>(rows, w, pn, 0, dh, p0 == 0, ahead, co);
    }
  }
}

// Passes of up to four heads, slab_width fitting their sums to the registers.
template <typename T, int Regs>
void values(const KvHeadData& h, const float* e, int64_t es, int G, const int32_t* cells, int64_t n, float* const* co) {
  if (n <= 0) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) std::memset(co[g], 0, sizeof(float) * static_cast<std::size_t>(h.dh));
    return;
  }
  for (int g0 = 0; g0 < G; g0 += 4)
    with_heads<4>(G - g0,
                  [&](auto gs) { values_g<T, gs.value, Regs>(h, e + g0 * es, es, cells, n, co + g0, g0 == 0); });
}

// indexer_score per cell: the heads' dots in passes of MaxG over four cells at a time, then
// total = total + w_j·ReLU(dot_j) in head order (ReLU: dot > 0 ? dot : +0, NaN to +0).
template <int MaxG>
void indexer_scores(const float* qi, const float* w, int heads, int dim, const float* keys, int64_t n, float* out) {
  const __m128 zero = _mm_setzero_ps();
  for (int64_t i = 0; i < n; i += kCells) {
    const float* k[kCells];
    for (int j = 0; j < kCells; ++j) k[j] = keys + std::min(i + j, n - 1) * dim;
    __m128 tot = zero;
    for (int j0 = 0; j0 < heads; j0 += MaxG) {
      const float* q[MaxG];
      __m128 d[MaxG];
      with_heads<MaxG>(heads - j0, [&](auto gs) {
        for (int g = 0; g < gs.value; ++g) q[g] = qi + static_cast<int64_t>(j0 + g) * dim;
        dots4<float, gs.value, /*Fused=*/false>(q, k, 0, dim, d);
        for (int g = 0; g < gs.value; ++g) {
          const __m128 relu = _mm_and_ps(d[g], _mm_cmpgt_ps(d[g], zero));
          tot = _mm_add_ps(tot, _mm_mul_ps(_mm_set1_ps(w[j0 + g]), relu));
        }
      });
    }
    store4(tot, out + i, n - i);
  }
}

// The table of these kernels with Regs vector registers: scores in head_passes; values in passes of up
// to four heads, slab_width fitting their sums to the registers (with 16, four heads of 16 columns: on the
// Zen 3 above a warm 1024-cell group's int8 values took 23 us against 31 in passes of three heads and of
// one, fp16 the same either way); the indexer's dots in passes of three heads with 16 registers, four with
// 32 (kFourCellHeads).
template <int Regs>
constexpr AttnKernels table() {
  return AttnKernels{scores_i8<Regs>,
                     scores_f<float, Regs>,
                     values<int8_t, Regs>,
                     values<float, Regs>,
                     scores_f<uint16_t, Regs>,
                     values<uint16_t, Regs>,
                     indexer_scores<kFourCellHeads<Regs>>};
}

}  // namespace
}  // namespace strata::engine::x86
