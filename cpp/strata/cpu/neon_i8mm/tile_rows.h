#pragma once
// The row and activation loops of the SMMLA kernels (cpu/neon_i8mm/, built with +i8mm): weight
// rows in pairs and activations in pairs, each pair of pairs one 2×2 tile whose lane (i, j) is
// row i against activation j. A policy T gives the tile arithmetic:
//   T::Block, T::Act, T::kBlockValues;
//   T::tiles<RP, AP>(nb, x[2·RP], y[2·AP], acc[RP][AP]) sets acc[p][q] = {x[2p]·y[2q],
//   x[2p]·y[2q+1], x[2p+1]·y[2q], x[2p+1]·y[2q+1]} over nb blocks.
// A lane's arithmetic must not depend on its partners: a lone row or activation is then paired
// with itself (the duplicate lanes dropped), and one activation gives bitwise what several do.
#include <arm_neon.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace strata::cpu::neon_i8mm {
namespace {

// Four fp16 bit patterns -> f32 lanes (exact, as fp16_to_fp32).
// One fp16 bit pattern -> f32 by the FCVT instruction (exact, as fp16_to_fp32).
inline float half(uint16_t h) {
  __fp16 v;
  std::memcpy(&v, &h, 2);
  return v;
}

inline float32x4_t halves(uint16_t a, uint16_t b, uint16_t c, uint16_t d) {
  const uint64_t v = uint64_t{a} | uint64_t{b} << 16 | uint64_t{c} << 32 | uint64_t{d} << 48;
  return vcvt_f32_f16(vreinterpret_f16_u64(vcreate_u64(v)));
}

// Two 16-byte rows u, v -> the 2×8 matrices of SMMLA: {u[0..8), v[0..8)} and {u[8..16), v[8..16)}.
inline int8x16_t zip_lo(int8x16_t u, int8x16_t v) {
  return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(u), vreinterpretq_s64_s8(v)));
}
inline int8x16_t zip_hi(int8x16_t u, int8x16_t v) {
  return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(u), vreinterpretq_s64_s8(v)));
}

// Rows [0, nrows) of w against the 2·AP activations y (a lone last one repeats its partner;
// outs[k] == nullptr for such a repeat): row pairs two at a time, then one, then a lone row.
template <class T, int AP>
void row_pass(int64_t nb, const uint8_t* w, std::size_t stride, int64_t nrows, const typename T::Act* const* y,
              float* const* outs) {
  using Block = typename T::Block;
  auto row = [&](int64_t r) { return reinterpret_cast<const Block*>(w + static_cast<std::size_t>(r) * stride); };
  auto store = [&](const float32x4_t& t, int64_t r0, bool two_rows, int q) {
    float v[4];
    vst1q_f32(v, t);
    for (int j = 0; j < 2; ++j) {
      float* o = outs[2 * q + j];
      if (o == nullptr) continue;
      o[r0] = v[j];
      if (two_rows) o[r0 + 1] = v[2 + j];
    }
  };
  int64_t r = 0;
  for (; r + 4 <= nrows; r += 4) {
    const Block* x[4] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
    float32x4_t acc[2][AP];
    T::template tiles<2, AP>(nb, x, y, acc);
    for (int q = 0; q < AP; ++q) {
      store(acc[0][q], r, true, q);
      store(acc[1][q], r + 2, true, q);
    }
  }
  if (r < nrows) {
    const bool two = r + 2 <= nrows;
    const Block* x[2] = {row(r), row(two ? r + 1 : r)};
    float32x4_t acc[1][AP];
    T::template tiles<1, AP>(nb, x, y, acc);
    for (int q = 0; q < AP; ++q) store(acc[0][q], r, two, q);
    if (two && r + 2 < nrows) {
      const Block* xl[2] = {row(r + 2), row(r + 2)};
      T::template tiles<1, AP>(nb, xl, y, acc);
      for (int q = 0; q < AP; ++q) store(acc[0][q], r + 2, false, q);
    }
  }
}

template <class T>
void rows_multi(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts, int nact,
                float* const* outs) {
  const auto* p = static_cast<const uint8_t*>(w);
  const int64_t nb = n / T::kBlockValues;
  using Act = typename T::Act;
  auto act = [&](int a) { return static_cast<const Act*>(acts[a]); };
  int a = 0;
  for (; a + 4 <= nact; a += 4) {
    const Act* y[4] = {act(a), act(a + 1), act(a + 2), act(a + 3)};
    row_pass<T, 2>(nb, p, stride, nrows, y, outs + a);
  }
  if (a + 2 <= nact) {
    const Act* y[2] = {act(a), act(a + 1)};
    row_pass<T, 1>(nb, p, stride, nrows, y, outs + a);
    a += 2;
  }
  if (a < nact) {
    const Act* y[2] = {act(a), act(a)};
    float* const o[2] = {outs[a], nullptr};
    row_pass<T, 1>(nb, p, stride, nrows, y, o);
  }
}

template <class T>
void rows(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  const void* acts[1] = {act};
  float* const outs[1] = {out};
  rows_multi<T>(n, w, stride, nrows, acts, 1, outs);
}

}  // namespace
}  // namespace strata::cpu::neon_i8mm
