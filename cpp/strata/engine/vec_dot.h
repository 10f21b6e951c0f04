#pragma once
// Short-vector kernels of the attention and norms (head-sized dots over float or int8 K/V, axpy).
// Every dot uses one fixed order — 8 interleaved partial sums (lane l takes elements i ≡ l mod 8,
// the tail continuing lanes 0, 1, ...), then ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) — and either
// separate multiplies and adds or (the *_fused entries) fused multiply-adds, so the AVX2 path is
// bitwise equal to the portable one (tests/cpp/test_engine_ops.cpp checks it) and results never
// depend on the ISA.
#include <cstdint>

namespace strata::engine {

struct VecKernels {
  float (*dot_f32)(const float* a, const float* b, int64_t n);
  float (*dot_i8)(const float* a, const int8_t* q, int64_t n);       // Σ a[i]·float(q[i])
  void (*axpy_f32)(float w, const float* x, int64_t n, float* out);  // out[i] += w·x[i]
  void (*axpy_i8)(float w, const int8_t* q, int64_t n, float* out);  // out[i] += w·float(q[i])
  // The f32 / fp16 K/V cells' dot and axpy (the attention's scores and values): the lanes and tree of
  // dot_f32, each product added by one fused multiply-add (one rounding: acc = fma(a, b, acc);
  // out[i] = fma(w, x[i], out[i])). A fused multiply-add is exact everywhere (hardware FMA, std::fma,
  // Metal's fma), so these too give the same bits on every path, for half the arithmetic.
  float (*dot_f32_fused)(const float* a, const float* b, int64_t n);
  void (*axpy_f32_fused)(float w, const float* x, int64_t n, float* out);
  // y[i] = exp_f32(x[i]) (in place allowed); h[i] = silu(g[i])·u[i] = (g / (1 + exp_f32(−g)))·u.
  // Every lane does exp_f32's operations, so each element is bitwise the scalar function's.
  void (*exp)(const float* x, float* y, int64_t n);
  void (*swiglu)(const float* g, const float* u, float* h, int64_t n);
  // The first i with x[i] > floor, NaN or +inf (n when there is none): the sampler's vocabulary scans
  // (argmax, top-k) skip with it the logits that cannot change their result and stop at any they must see.
  int64_t (*first_above)(const float* x, int64_t n, float floor);
  // Σ exp_f32(x[i] − ref) in one pass, nothing stored: 16 float partial sums (lane l takes the i ≡ l
  // mod 16), lanes 0-7 and 8-15 each reduced by dot_f32's tree, then half 0 + half 1; the same bits on
  // every path. A softmax's normaliser where only it is wanted (the speculator's greedy peak and the
  // probability of a draft).
  float (*exp_sum)(const float* x, int64_t n, float ref);
  // The largest x[i] (−inf for n = 0; NaNs are passed over, as std::max(best, x[i]) does; a zero maximum
  // is +0, whichever zeros tie): exact, so the order of the comparisons never shows. The attention's
  // softmax maxima.
  float (*max)(const float* x, int64_t n);
  // m = max(x, n), then y[i] = x[i] − m (in place allowed); returns m. A softmax chunk's shift.
  float (*shift_by_max)(const float* x, int64_t n, float* y);
  // y[i] = fp32_to_fp16(x[i]) (util/fp16.h: round to nearest even, NaN as 0x7E00 with its sign): the fp16
  // K/V cells' writes. F16C's conversion rounds every other value the same way (all 2^32 inputs checked).
  void (*to_fp16)(const float* x, uint16_t* y, int64_t n);
};

// e^x from a degree-6 polynomial on [−ln2/2, ln2/2] times 2^n (Cephes' expf), each multiply and add
// rounded separately so the vector kernels reproduce it lane for lane: ≤ 2 ulp from the exact value
// for x in [−87, 88]; 0 below −87 (e^−87 ≈ 1.6e−38: the normal range ends there), +∞ above 88, NaN
// for NaN. SiLU / SwiGLU and the attention's softmax use it instead of std::exp, whose result depends on
// the C library and which no SIMD path could match (the Metal attention computes the same function,
// metal/kernels/common.h exp_cpu, and is tested byte-identical to the CPU's).
float exp_f32(float x);

// exp_f32's constants, shared by the scalar function and the vector kernels that reproduce it.
namespace exp_poly {
inline constexpr float kLo = -87.0f, kHi = 88.0f;  // outside: 0 / +inf
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 = kLn2Hi + kLn2Lo
// y = ((((p0·r + p1)·r + p2)·r + p3)·r + p4)·r + p5, then y·r² + r + 1
inline constexpr float kP[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
}  // namespace exp_poly

// The dots' fixed tree over 8 partial sums: ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)).
inline float reduce8(const float* a) { return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7])); }
// exp_sum's reduction of its 16 partial sums (every path stores them and calls this).
inline float reduce_exp_lanes(const float* a) { return reduce8(a) + reduce8(a + 8); }

// The kernels of cpu::active_isa() (looked up on every call: cheap, follows force_isa()).
const VecKernels& vec_kernels();
const VecKernels& vec_kernels_scalar();
#if defined(STRATA_HAVE_AVX2_TU)
const VecKernels& vec_kernels_avx2();
#endif
#if defined(STRATA_HAVE_AVX512_TU)
// The AVX2 table with exp, swiglu, first_above and exp_sum on 16 lanes.
const VecKernels& vec_kernels_avx512();
#endif

inline float dot_f32(const float* a, const float* b, int64_t n) { return vec_kernels().dot_f32(a, b, n); }

// The index of the first largest x[i] (ties to the lowest index; a NaN never wins, so 0 when x[0] is
// the largest or NaN): what a scan comparing every element finds, with first_above jumping to the next
// element above the running best (or a NaN / +inf, which the comparison then judges). The greedy
// sampler's argmax and the drafter's token.
inline int64_t first_argmax(const VecKernels& k, const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    i += k.first_above(x + i, n - i, x[best]);
    if (i >= n) break;
    if (x[i] > x[best]) best = i;
  }
  return best;
}
inline int64_t first_argmax(const float* x, int64_t n) { return first_argmax(vec_kernels(), x, n); }

}  // namespace strata::engine
