// Metal entry points of the GEMV, the plan-driven MoE GEMV (tile L, R, K as function constants 0, 1,
// 2; S is the threadgroup size) and the row gather, per block format. Bodies: gemv.h, moe.h,
// quant_formats.h.
#include "metal/kernels/gemv.h"
#include "metal/kernels/moe.h"

constant uint kTileL [[function_constant(0)]];
constant uint kTileR [[function_constant(1)]];
constant uint kTileK [[function_constant(2)]];

#define STRATA_GEMV_ENTRIES(suffix, F)                                                                              \
  kernel void strata_gemv_##suffix(constant GemvArgs& a [[buffer(0)]], device const uchar* W [[buffer(1)]],         \
                                   device const float* X [[buffer(2)]], device float* Y [[buffer(3)]],              \
                                   STRATA_KPOS_PARAMS) {                                                            \
    gemv_body<F>(a, W, X, Y, kTileL, kTileR, kTileK, STRATA_KPOS);                                                  \
  }                                                                                                                 \
  kernel void strata_get_rows_##suffix(constant GemvArgs& a [[buffer(0)]], device const uchar* W [[buffer(1)]],     \
                                       device const int* ids [[buffer(2)]], device float* out [[buffer(3)]],        \
                                       STRATA_KPOS_PARAMS) {                                                        \
    get_rows_body<F>(a, W, ids, out, STRATA_KPOS);                                                                  \
  }                                                                                                                 \
  kernel void strata_moe_gemv_##suffix(                                                                             \
      constant GemvArgs& a [[buffer(0)]], device const uchar* W [[buffer(1)]], device const float* X [[buffer(2)]], \
      device float* Y [[buffer(3)]], device const PlanHeader* hdr [[buffer(4)]],                                    \
      device const int* group_expert [[buffer(5)]], device const int* group_offset [[buffer(6)]],                   \
      device const int* slot_entry [[buffer(7)]], STRATA_KPOS_PARAMS) {                                             \
    moe_gemv_body<F>(a, W, X, Y, hdr, group_expert, group_offset, slot_entry, kTileL, kTileR, kTileK, STRATA_KPOS); \
  }

STRATA_GEMV_ENTRIES(f32, FmtF32)
STRATA_GEMV_ENTRIES(f16, FmtF16)
STRATA_GEMV_ENTRIES(bf16, FmtBF16)
STRATA_GEMV_ENTRIES(q8_0, FmtQ8_0)
STRATA_GEMV_ENTRIES(q4_0, FmtQ4_0)
STRATA_GEMV_ENTRIES(q5_0, FmtQ5_0)
STRATA_GEMV_ENTRIES(q5_1, FmtQ5_1)
STRATA_GEMV_ENTRIES(q4_k, FmtQ4_K)
STRATA_GEMV_ENTRIES(q6_k, FmtQ6_K)
STRATA_GEMV_ENTRIES(q2_k, FmtQ2_K)
STRATA_GEMV_ENTRIES(iq4_xs, FmtIQ4_XS)
STRATA_GEMV_ENTRIES(iq4_nl, FmtIQ4_NL)
STRATA_GEMV_ENTRIES(q3_k, FmtQ3_K)
STRATA_GEMV_ENTRIES(q5_k, FmtQ5_K)
STRATA_GEMV_ENTRIES(iq2_xs, FmtIQ2_XS)
STRATA_GEMV_ENTRIES(iq3_xxs, FmtIQ3_XXS)
STRATA_GEMV_ENTRIES(iq2_xxs, FmtIQ2_XXS)
STRATA_GEMV_ENTRIES(iq3_s, FmtIQ3_S)
STRATA_GEMV_ENTRIES(iq2_s, FmtIQ2_S)
STRATA_GEMV_ENTRIES(iq1_s, FmtIQ1_S)
STRATA_GEMV_ENTRIES(iq1_m, FmtIQ1_M)
