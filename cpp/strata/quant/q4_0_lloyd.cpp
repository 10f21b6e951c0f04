// Q4_0 with a Lloyd (k-means) fit per block — SPEC R-11.
//
// Q4_0 decodes x ≈ d·k with k = q − 8 ∈ [−8, 7] and d one fp16 scale per 32 values, so the
// block's codebook is the uniform 16-level grid scaled by d. Lloyd's two steps under that
// constraint are: assign every value to its nearest level (k = clamp(round(x/d))), then refit the
// codebook to the assignment (the least-squares scale d = Σxk / Σk²). Iterated to a fixed point
// from several starting scales of both signs (the grid is asymmetric, so the sign of d decides
// which end gets the extra level), each result is rounded to fp16 and its neighbouring half values
// tried, and every candidate is scored with exactly the values dequantize_row will produce. The
// ggml rule's own block is one of the candidates and wins ties, so the fit is never worse.
#include <cmath>
#include <cstring>

#include "strata/quant/quantize.h"
#include "strata/util/fp16.h"

namespace strata::quant {
namespace {

constexpr int kMaxIterations = 12;
// Starting scales amax / c for both signs.
constexpr float kStartDivisors[] = {9.0f, 8.5f, 8.0f, 7.5f, 7.0f, 6.5f, 6.0f, 5.5f, 5.0f, 4.5f};

// Nearest grid index of v (in units of the scale), clamped to the Q4_0 range. Truncation of a
// value shifted to be positive is floor: no libm call on the hot path.
inline int grid_index(double v) {
  v = v < -8.5 ? -8.5 : (v > 7.49 ? 7.49 : v);
  return static_cast<int>(v + 8.5) - 8;
}

// The best assignment for one fp16 scale and its squared error. Levels are the exact floats
// dequantization computes (d * float(k)); each value tries the rounded level and its neighbours
// so float error in x/d cannot cost the true nearest level.
double assign_for_scale(const float* x, uint16_t d16, uint8_t* q) {
  const float d = fp16_to_fp32(d16);
  double err = 0.0;
  if (d == 0.0f || !std::isfinite(d)) {
    for (int j = 0; j < kQK32; ++j) {
      q[j] = 8;
      err += static_cast<double>(x[j]) * static_cast<double>(x[j]);
    }
    return err;
  }
  const float id = 1.0f / d;
  for (int j = 0; j < kQK32; ++j) {
    const int k0 = grid_index(static_cast<double>(x[j] * id));
    double best = INFINITY;
    int best_k = k0;
    for (int k = k0 - 1; k <= k0 + 1; ++k) {
      if (k < -8 || k > 7) continue;
      const double e = static_cast<double>(x[j]) - static_cast<double>(d * static_cast<float>(k));
      if (e * e < best) {
        best = e * e;
        best_k = k;
      }
    }
    q[j] = static_cast<uint8_t>(best_k + 8);
    err += best;
  }
  return err;
}

struct Fit {
  double d = 0.0;
  double err = INFINITY;  // squared error of d with its nearest-level assignment (double arithmetic)
};

// Lloyd iterations in double from scale d to a fixed point (or the iteration cap).
Fit lloyd_fit(const float* x, double d) {
  int k[kQK32];
  int prev[kQK32];
  Fit fit;
  for (int it = 0; it < kMaxIterations; ++it) {
    if (!(std::fabs(d) > 0.0) || !std::isfinite(d)) return fit;
    const double id = 1.0 / d;
    double sxk = 0.0, skk = 0.0, err = 0.0;
    for (int j = 0; j < kQK32; ++j) {
      k[j] = grid_index(static_cast<double>(x[j]) * id);
      const double kj = static_cast<double>(k[j]);
      const double e = static_cast<double>(x[j]) - d * kj;
      err += e * e;
      sxk += static_cast<double>(x[j]) * kj;
      skk += kj * kj;
    }
    if (err < fit.err) fit = {d, err};
    if (it > 0 && std::memcmp(k, prev, sizeof(k)) == 0) break;  // fixed point
    if (skk == 0.0) break;
    d = sxk / skk;
    std::memcpy(prev, k, sizeof(k));
  }
  return fit;
}

struct Best {
  uint16_t d16 = 0;
  double err = INFINITY;
  uint8_t q[kQK32];
};

// Scores d16 and its neighbouring half values of the same sign.
void try_scale(const float* x, float d, Best& best) {
  const uint16_t center = fp32_to_fp16(d);
  for (int delta = -1; delta <= 1; ++delta) {
    const int mag = (center & 0x7FFF) + delta;
    if (mag < 0 || mag >= 0x7C00) continue;  // keep finite
    const uint16_t d16 = static_cast<uint16_t>((center & 0x8000) | mag);
    uint8_t q[kQK32];
    const double err = assign_for_scale(x, d16, q);
    if (err < best.err) {
      best.err = err;
      best.d16 = d16;
      std::memcpy(best.q, q, sizeof(q));
    }
  }
}

void pack(const Best& b, BlockQ4_0& out) {
  out.d = b.d16;
  for (int j = 0; j < kQK32 / 2; ++j) out.qs[j] = static_cast<uint8_t>(b.q[j] | (b.q[j + 16] << 4));
}

}  // namespace

double q4_0_block_sq_error(const float* x, const BlockQ4_0& b) {
  const float d = fp16_to_fp32(b.d);
  double err = 0.0;
  for (int j = 0; j < kQK32 / 2; ++j) {
    const double e0 = static_cast<double>(x[j]) - static_cast<double>(d * static_cast<float>((b.qs[j] & 0xF) - 8));
    const double e1 = static_cast<double>(x[j + 16]) - static_cast<double>(d * static_cast<float>((b.qs[j] >> 4) - 8));
    err += e0 * e0 + e1 * e1;
  }
  return err;
}

void quantize_row_q4_0_lloyd(const float* x, BlockQ4_0* y, int64_t n) {
  for (int64_t i = 0; i < n / kQK32; ++i, x += kQK32) {
    BlockQ4_0 plain;
    quantize_row_q4_0(x, &plain, kQK32);
    const double plain_err = q4_0_block_sq_error(x, plain);
    float amax = 0.0f;
    for (int j = 0; j < kQK32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    if (amax == 0.0f || plain_err == 0.0) {
      y[i] = plain;
      continue;
    }
    // Lloyd from every start; the two best fits (by their double-precision error) go on to the
    // exact fp16 scoring together with the ggml scale itself.
    Fit top[2];
    const auto keep = [&top](const Fit& f) {
      if (f.err < top[0].err) {
        if (f.d != top[0].d) top[1] = top[0];
        top[0] = f;
      } else if (f.err < top[1].err && f.d != top[0].d) {
        top[1] = f;
      }
    };
    keep(lloyd_fit(x, static_cast<double>(fp16_to_fp32(plain.d))));
    for (const float c : kStartDivisors)
      for (const float sign : {1.0f, -1.0f}) keep(lloyd_fit(x, static_cast<double>(sign * amax / c)));
    Best best;
    try_scale(x, fp16_to_fp32(plain.d), best);  // Lloyd's assignment step alone on ggml's scale
    for (const Fit& f : top)
      if (std::isfinite(f.err)) try_scale(x, static_cast<float>(f.d), best);
    if (best.err < plain_err) {
      pack(best, y[i]);
    } else {
      y[i] = plain;
    }
  }
}

}  // namespace strata::quant
