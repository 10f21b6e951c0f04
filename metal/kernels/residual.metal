// Metal entry points of the residual path: hyper-connection combine (R-5), RMSNorm rows,
// hyper-connection coefficients + collapse. Bodies: combine.h, norm.h.
#include "metal/kernels/combine.h"
#include "metal/kernels/norm.h"

#define STRATA_COMBINE_PARAMS                                                                \
  constant CombineArgs &a [[buffer(0)]], device const float *routed [[buffer(1)]],           \
      device const float *weights [[buffer(2)]], device const float *shared [[buffer(3)]],   \
      device const float *shared_gate [[buffer(4)]], device const float *post [[buffer(5)]], \
      device const float *comb [[buffer(6)]], device const float *x_in [[buffer(7)]],        \
      device float *x_out [[buffer(8)]]

kernel void strata_combine_generic(STRATA_COMBINE_PARAMS, STRATA_KPOS_PARAMS) {
  combine_generic_body(a, routed, weights, shared, shared_gate, post, comb, x_in, x_out, STRATA_KPOS);
}

kernel void strata_combine_fast_2560x4(STRATA_COMBINE_PARAMS, STRATA_KPOS_PARAMS) {
  combine_fast_body<kCombineFastN, kCombineFastD>(a, routed, weights, shared, shared_gate, post, comb, x_in, x_out,
                                                  STRATA_KPOS);
}

kernel void strata_rms_rows(constant RmsArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                            device const float* w [[buffer(2)]], device float* out [[buffer(3)]],
                            threadgroup float* tmp [[threadgroup(0)]], STRATA_KPOS_PARAMS) {
  rms_rows_body(a, x, w, out, tmp, STRATA_KPOS);
}

kernel void strata_hc_collapse(constant HcArgs& a [[buffer(0)]], device const float* mix [[buffer(1)]],
                               device const float* scale [[buffer(2)]], device const float* base [[buffer(3)]],
                               device const float* X [[buffer(4)]], device float* post [[buffer(5)]],
                               device float* comb [[buffer(6)]], device float* out [[buffer(7)]],
                               threadgroup float* pre [[threadgroup(0)]], STRATA_KPOS_PARAMS) {
  hc_collapse_body(a, mix, scale, base, X, post, comb, out, pre, STRATA_KPOS);
}
