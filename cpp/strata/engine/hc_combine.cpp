// Bitwise equality between the generic and the fixed-shape path needs the compiler to keep every
// multiply and add separate (no FMA contraction, which may differ between the two loop shapes).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "strata/engine/hc_combine.h"

#include "strata/util/error.h"

namespace strata::engine {
namespace {

constexpr int kTile = 16;  // elements per inner tile (vectorizes to whole SIMD registers)
constexpr int kMaxStreams = 64;

// One token: elements [i0, i0 + len) with len <= kTile. N/D > 0 make the shapes compile-time.
template <int N>
inline void combine_tile(const CombineArgs& a, int n, int t, int64_t i0, int len) {
  const int64_t d = a.d;
  const int streams = N > 0 ? N : n;
  const float* w = a.weights + static_cast<int64_t>(t) * a.k;
  const float* routed = a.routed + static_cast<int64_t>(t) * a.k * d;
  float y[kTile];
  for (int l = 0; l < kTile; ++l) y[l] = 0.0f;
  for (int kk = 0; kk < a.k; ++kk) {
    const float wk = w[kk];
    const float* r = routed + kk * d + i0;
    for (int l = 0; l < len; ++l) y[l] += wk * r[l];
  }
  if (a.shared) {
    const float g = a.shared_gate[t];
    const float* s = a.shared + static_cast<int64_t>(t) * d + i0;
    for (int l = 0; l < len; ++l) y[l] += g * s[l];
  }
  const float* post = a.post + static_cast<int64_t>(t) * streams;
  const float* comb = a.comb + static_cast<int64_t>(t) * streams * streams;
  const float* xin = a.x_in + static_cast<int64_t>(t) * streams * d + i0;
  float* xout = a.x_out + static_cast<int64_t>(t) * streams * d + i0;
  // Read every stream's tile before writing any (x_out may alias x_in).
  float x[(N > 0 ? N : kMaxStreams)][kTile];
  for (int j = 0; j < streams; ++j)
    for (int l = 0; l < len; ++l) x[j][l] = xin[j * d + l];
  for (int s = 0; s < streams; ++s) {
    float acc[kTile];
    const float ps = post[s];
    for (int l = 0; l < len; ++l) acc[l] = ps * y[l];
    for (int j = 0; j < streams; ++j) {
      const float c = comb[j * streams + s];
      for (int l = 0; l < len; ++l) acc[l] += c * x[j][l];
    }
    for (int l = 0; l < len; ++l) xout[s * d + l] = acc[l];
  }
}

// Whole tiles with a compile-time length, so the inner loops become straight SIMD code.
template <int N>
inline void combine_full_tile(const CombineArgs& a, int t, int64_t i0) {
  const int64_t d = a.d;
  const float* w = a.weights + static_cast<int64_t>(t) * a.k;
  const float* routed = a.routed + static_cast<int64_t>(t) * a.k * d;
  float y[kTile] = {};
  for (int kk = 0; kk < a.k; ++kk) {
    const float wk = w[kk];
    const float* r = routed + kk * d + i0;
    for (int l = 0; l < kTile; ++l) y[l] += wk * r[l];
  }
  if (a.shared) {
    const float g = a.shared_gate[t];
    const float* s = a.shared + static_cast<int64_t>(t) * d + i0;
    for (int l = 0; l < kTile; ++l) y[l] += g * s[l];
  }
  const float* post = a.post + static_cast<int64_t>(t) * N;
  const float* comb = a.comb + static_cast<int64_t>(t) * N * N;
  const float* xin = a.x_in + static_cast<int64_t>(t) * N * d + i0;
  float* xout = a.x_out + static_cast<int64_t>(t) * N * d + i0;
  float x[N][kTile];
  for (int j = 0; j < N; ++j)
    for (int l = 0; l < kTile; ++l) x[j][l] = xin[j * d + l];
  for (int s = 0; s < N; ++s) {
    float acc[kTile];
    const float ps = post[s];
    for (int l = 0; l < kTile; ++l) acc[l] = ps * y[l];
    for (int j = 0; j < N; ++j) {
      const float c = comb[j * N + s];
      for (int l = 0; l < kTile; ++l) acc[l] += c * x[j][l];
    }
    for (int l = 0; l < kTile; ++l) xout[s * d + l] = acc[l];
  }
}

void check_args(const CombineArgs& a) {
  if (a.n < 1 || a.n > kMaxStreams || a.d < 0 || a.n_tok < 0 || a.k < 0)
    throw_error(ErrorKind::Internal, "hc_combine: bad shape");
}

// Stream counts of the models we run get compile-time shapes (whole tiles as straight SIMD code, the
// tail through combine_tile); other counts take the runtime-shaped tile. Every shape does the same
// operations in the same order, so all of them are bitwise equal.
template <int N>
void combine_rows(const CombineArgs& a) {
  for (int t = 0; t < a.n_tok; ++t) {
    int64_t i0 = 0;
    if constexpr (N > 0)
      for (; i0 + kTile <= a.d; i0 += kTile) combine_full_tile<N>(a, t, i0);
    for (; i0 < a.d; i0 += kTile) {
      const int len = static_cast<int>(a.d - i0 < kTile ? a.d - i0 : kTile);
      combine_tile<N>(a, a.n, t, i0, len);
    }
  }
}

}  // namespace

void hc_combine_generic(const CombineArgs& a) {
  check_args(a);
  switch (a.n) {
    case 1: combine_rows<1>(a); break;
    case 2: combine_rows<2>(a); break;
    case 4: combine_rows<4>(a); break;
    default: combine_rows<0>(a); break;
  }
}

bool hc_combine_has_fast_path(int64_t d, int n) { return d == 2560 && n == 4; }

void hc_combine_fast(const CombineArgs& a) {
  if (!hc_combine_has_fast_path(a.d, a.n)) throw_error(ErrorKind::Internal, "hc_combine_fast: no fast path for shape");
  static_assert(2560 % kTile == 0);
  for (int t = 0; t < a.n_tok; ++t)
    for (int64_t i0 = 0; i0 < 2560; i0 += kTile) combine_full_tile<4>(a, t, i0);
}

void hc_combine(const CombineArgs& a) {
  if (hc_combine_has_fast_path(a.d, a.n))
    hc_combine_fast(a);
  else
    hc_combine_generic(a);
}

}  // namespace strata::engine
