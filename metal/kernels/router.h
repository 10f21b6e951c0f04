#pragma once
// MOCE top-K routing (SPEC §2.4, R-1) on the GPU: one SIMD group per row, the same rule as
// cpp/strata/routing/router.cpp (docs/routing.md), written for 32 lanes:
//   - lane l owns the contiguous experts [l·c, l·c + c), c = ceil(E/32), so a lower lane holds lower
//     ids and "ties to the lowest id" is a simd_min over ids;
//   - at each rank, every lane finds its best untaken resident and nonresident expert (probability
//     desc, id asc); two simd_max + two simd_min give the class heads; the rank's multiplier decides
//     between them with an exact comparison of p_res·M against p_non (the product of two floats is
//     exact in 64-bit integers: no double needed on the GPU, subnormals included);
//   - weights are the picked probabilities over their sum (an error-free float two-sum, floored at
//     2^-14): within 2e-7 of the double-precision reference.
// Optionally the input is router logits and the row is softmaxed first, exactly as the CPU does
// (max, exp, sum in index order by lane 0, multiply by the inverse).
#include "metal/kernels/common.h"

enum : uint { kRouteMaxPerLane = 32, kRouteMaxExperts = 32 * 32, kRouteMaxK = 64 };

// The multiplier an unpicked resident expert carries while rank `rank` is picked (docs/routing.md).
inline float moce_multiplier(constant RouteArgs& a, bool draft_row, uint rank) {
  const bool as_draft = draft_row && a.draft != 0;
  const float m = as_draft ? a.resident_bonus * a.resident_bonus : a.resident_bonus;
  const int prot = as_draft ? 1 : (a.protect < 0 ? 0 : a.protect);
  if (rank == 0) return 1.0f;
  const bool rank1_branch = a.rank1_scale > 1.0f && prot > 1;
  if (rank1_branch) {
    if (int(rank) < prot) return a.rank1_scale;
    return m > 1.0f ? m : a.rank1_scale;
  }
  const int bonus_from = prot > 1 ? prot : 1;
  return (int(rank) >= bonus_from && m > 1.0f) ? m : 1.0f;
}

// |f| as significand · 2^exponent with an integer significand below 2^24.
inline void float_parts(float f, thread ulong& mant, thread int& e) {
  const uint u = as_type<uint>(f) & 0x7FFFFFFFu;
  const uint ex = u >> 23, m = u & 0x7FFFFFu;
  mant = ex == 0 ? ulong(m) : ulong(m | 0x800000u);
  e = ex == 0 ? -149 : int(ex) - 150;
}

inline int clz64(ulong x) {  // x != 0
  const uint hi = uint(x >> 32);
  return hi != 0 ? int(clz(hi)) : 32 + int(clz(uint(x)));
}

// Compares ma·2^ea with mb·2^eb (non-negative): -1, 0 or 1.
inline int cmp_parts(ulong ma, int ea, ulong mb, int eb) {
  if (ma == 0 || mb == 0) return ma == 0 ? (mb == 0 ? 0 : -1) : 1;
  const int sa = clz64(ma) - 1, sb = clz64(mb) - 1;  // top bit to position 62
  ma <<= ulong(sa);
  mb <<= ulong(sb);
  ea -= sa;
  eb -= sb;
  if (ea != eb) return ea > eb ? 1 : -1;
  return ma > mb ? 1 : (ma < mb ? -1 : 0);
}

// The sign of a·m − b computed exactly (finite a, b; m > 0 finite).
inline int cmp_scaled(float a, float m, float b) {
  const bool na = a < 0.0f, nb = b < 0.0f;
  if (na != nb) return na ? -1 : 1;
  ulong ma, mm, mb;
  int ea, em, eb;
  float_parts(a, ma, ea);
  float_parts(m, mm, em);
  float_parts(b, mb, eb);
  const int c = cmp_parts(ma * mm, ea + em, mb, eb);
  return na ? -c : c;
}

// One SIMD group per row: rows [tg_x·n_sg, tg_x·n_sg + n_sg). scratch: n_sg·(E+1) floats when
// a.softmax, else unused. status[row] = 1 when fewer than k experts have a probability above -inf.
inline void route_rows_body(constant RouteArgs& a, device const float* x, device const uchar* resident, device int* ids,
                            device float* weights, device int* status, TGP(float) scratch, KPos p) {
  const uint row = p.tg_x * p.n_sg + p.sg;
  if (row >= a.n_rows) return;  // the whole SIMD group leaves: no threadgroup barrier follows
  const uint E = a.n_experts, K = a.k, lane = p.lane;
  const uint per = (E + 31u) / 32u;
  const uint e0 = lane * per;
  const uint cnt = e0 < E ? metal::min(per, E - e0) : 0u;
  device const float* xr = x + ulong(row) * a.row_stride;

  float v[kRouteMaxPerLane];
  for (uint j = 0; j < kRouteMaxPerLane; ++j) v[j] = j < cnt ? xr[e0 + j] : -INFINITY;

  if (a.softmax != 0) {
    TGP(float) s = scratch + p.sg * (E + 1);
    float mx = -INFINITY;
    for (uint j = 0; j < cnt; ++j) mx = v[j] > mx ? v[j] : mx;
    const float m = simd_max(mx);
    for (uint j = 0; j < cnt; ++j) {
      v[j] = metal::exp(v[j] - m);
      s[e0 + j] = v[j];
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    if (lane == 0) {
      float sum = 0.0f;  // index order, as the CPU softmax
      for (uint i = 0; i < E; ++i) sum += s[i];
      s[E] = sum;
    }
    simdgroup_barrier(mem_flags::mem_threadgroup);
    const float inv = 1.0f / float(s[E]);
    for (uint j = 0; j < cnt; ++j) v[j] *= inv;
  }

  uint resmask = 0;
  if (a.has_resident != 0) {
    device const uchar* res = resident + ulong(row) * a.resident_stride;
    for (uint j = 0; j < cnt; ++j)
      if (res[e0 + j] != 0) resmask |= 1u << j;
  }
  const bool draft_row = a.draft_from_row >= 0 && int(row) >= a.draft_from_row;

  uint taken = 0;
  int my_id[2] = {-1, -1};  // the picks of ranks lane and lane + 32
  float my_val[2] = {0.0f, 0.0f};
  float sum_hi = 0.0f, sum_lo = 0.0f;
  bool ok = true;
  for (uint t = 0; t < K; ++t) {
    float br = -INFINITY, bn = -INFINITY;
    int ir = 0x7FFFFFFF, in = 0x7FFFFFFF;
    for (uint j = 0; j < cnt; ++j) {
      const float val = v[j];
      if ((taken >> j) & 1u) continue;
      if (!(val > -INFINITY)) continue;  // NaN and -inf are never candidates
      if ((resmask >> j) & 1u) {
        if (val > br) {
          br = val;
          ir = int(e0 + j);
        }
      } else if (val > bn) {
        bn = val;
        in = int(e0 + j);
      }
    }
    const float gr = simd_max(br);
    const int gir = simd_min((ir != 0x7FFFFFFF && br == gr) ? ir : 0x7FFFFFFF);
    const float gn = simd_max(bn);
    const int gin = simd_min((in != 0x7FFFFFFF && bn == gn) ? in : 0x7FFFFFFF);
    if (gir == 0x7FFFFFFF && gin == 0x7FFFFFFF) {
      ok = false;
      break;
    }
    bool take_res;
    if (gir == 0x7FFFFFFF) {
      take_res = false;
    } else if (gin == 0x7FFFFFFF) {
      take_res = true;
    } else {
      const int c = cmp_scaled(gr, moce_multiplier(a, draft_row, t), gn);
      take_res = c > 0 || (c == 0 && gir < gin);
    }
    const int id = take_res ? gir : gin;
    const float val = take_res ? gr : gn;  // the weight uses the original probability
    if (uint(id) >= e0 && uint(id) < e0 + cnt) taken |= 1u << (uint(id) - e0);
    if ((t & 31u) == lane) {
      my_id[t >> 5] = id;
      my_val[t >> 5] = val;
    }
    // sum_hi + sum_lo is the exact running sum (Knuth's two-sum).
    const float s = sum_hi + val;
    const float bb = s - sum_hi;
    sum_lo += (sum_hi - (s - bb)) + (val - bb);
    sum_hi = s;
  }
  if (!ok) {
    for (uint t = lane; t < K; t += 32u) {
      ids[row * K + t] = -1;
      weights[row * K + t] = 0.0f;
    }
    if (lane == 0) status[row] = 1;
    return;
  }
  const float sum = sum_hi + sum_lo;
  const float denom = sum >  // floor 2^-14
                              6.103515625e-05f
                          ? sum
                          : 6.103515625e-05f;
  for (uint t = lane; t < K; t += 32u) {
    ids[row * K + t] = my_id[t >> 5];
    weights[row * K + t] = my_val[t >> 5] / denom;
  }
  if (lane == 0) status[row] = 0;
}
