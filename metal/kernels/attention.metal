// Metal entry points of QSA attention: prep (function constant 0: kv_only), split chunks + merge,
// and the fused drafter kernel (R-6), for int8 cells (strata: KvI8) and, suffixed _f32, f32 cells
// (qwen3moe: KvF32). Same buffer indices for both formats (f32 leaves the scale buffers unread).
// Bodies: attention.h.
#include "metal/kernels/attention.h"

constant bool kKvOnly [[function_constant(0)]];

kernel void strata_qsa_prep(constant QsaPrepArgs& a [[buffer(0)]], device const float* qp [[buffer(1)]],
                            device const float* kp [[buffer(2)]], device const float* vp [[buffer(3)]],
                            device const float* q_norm [[buffer(4)]], device const float* k_norm [[buffer(5)]],
                            device const float* cs [[buffer(6)]], device float* qh [[buffer(7)]],
                            device uchar* k8 [[buffer(8)]], device ushort* ks [[buffer(9)]],
                            device uchar* v8 [[buffer(10)]], device ushort* vs [[buffer(11)]], STRATA_KPOS_PARAMS) {
  qsa_prep_body<KvI8>(a, qp, kp, vp, q_norm, k_norm, cs, qh, k8, ks, v8, vs, kKvOnly, STRATA_KPOS);
}

kernel void strata_qsa_prep_f32(constant QsaPrepArgs& a [[buffer(0)]], device const float* qp [[buffer(1)]],
                                device const float* kp [[buffer(2)]], device const float* vp [[buffer(3)]],
                                device const float* q_norm [[buffer(4)]], device const float* k_norm [[buffer(5)]],
                                device const float* cs [[buffer(6)]], device float* qh [[buffer(7)]],
                                device uchar* k [[buffer(8)]], device ushort* ks [[buffer(9)]],
                                device uchar* v [[buffer(10)]], device ushort* vs [[buffer(11)]], STRATA_KPOS_PARAMS) {
  qsa_prep_body<KvF32>(a, qp, kp, vp, q_norm, k_norm, cs, qh, k, ks, v, vs, kKvOnly, STRATA_KPOS);
}

kernel void strata_attn_chunks(constant AttnArgs& a [[buffer(0)]], device const float* qh [[buffer(1)]],
                               device const uchar* k8 [[buffer(2)]], device const ushort* ks [[buffer(3)]],
                               device const uchar* v8 [[buffer(4)]], device const ushort* vs [[buffer(5)]],
                               device const int* cells [[buffer(6)]], device const int* n_cells [[buffer(7)]],
                               device float* part_o [[buffer(8)]], device float* part_ml [[buffer(9)]],
                               threadgroup float* tg_e [[threadgroup(0)]], threadgroup float* tg_m [[threadgroup(1)]],
                               STRATA_KPOS_PARAMS) {
  attn_chunks_body<KvI8>(a, qh, k8, ks, v8, vs, cells, n_cells, part_o, part_ml, tg_e, tg_m, STRATA_KPOS);
}

kernel void strata_attn_chunks_f32(constant AttnArgs& a [[buffer(0)]], device const float* qh [[buffer(1)]],
                                   device const uchar* k [[buffer(2)]], device const ushort* ks [[buffer(3)]],
                                   device const uchar* v [[buffer(4)]], device const ushort* vs [[buffer(5)]],
                                   device const int* cells [[buffer(6)]], device const int* n_cells [[buffer(7)]],
                                   device float* part_o [[buffer(8)]], device float* part_ml [[buffer(9)]],
                                   threadgroup float* tg_e [[threadgroup(0)]],
                                   threadgroup float* tg_m [[threadgroup(1)]], STRATA_KPOS_PARAMS) {
  attn_chunks_body<KvF32>(a, qh, k, ks, v, vs, cells, n_cells, part_o, part_ml, tg_e, tg_m, STRATA_KPOS);
}

kernel void strata_attn_merge(constant AttnArgs& a [[buffer(0)]], device const float* part_o [[buffer(1)]],
                              device const float* part_ml [[buffer(2)]], device const int* n_cells [[buffer(3)]],
                              device const float* gates [[buffer(4)]], device float* out [[buffer(5)]],
                              STRATA_KPOS_PARAMS) {
  attn_merge_body(a, part_o, part_ml, n_cells, gates, out, STRATA_KPOS);
}

kernel void strata_attn_fused(constant AttnArgs& a [[buffer(0)]], device const float* qh [[buffer(1)]],
                              device const uchar* k8 [[buffer(2)]], device const ushort* ks [[buffer(3)]],
                              device const uchar* v8 [[buffer(4)]], device const ushort* vs [[buffer(5)]],
                              device const int* cells [[buffer(6)]], device const int* n_cells [[buffer(7)]],
                              device const float* gates [[buffer(8)]], device float* out [[buffer(9)]],
                              threadgroup float* tg_s [[threadgroup(0)]], threadgroup float* tg_ml [[threadgroup(1)]],
                              STRATA_KPOS_PARAMS) {
  attn_fused_body<KvI8>(a, qh, k8, ks, v8, vs, cells, n_cells, gates, out, tg_s, tg_ml, STRATA_KPOS);
}

kernel void strata_attn_fused_f32(constant AttnArgs& a [[buffer(0)]], device const float* qh [[buffer(1)]],
                                  device const uchar* k [[buffer(2)]], device const ushort* ks [[buffer(3)]],
                                  device const uchar* v [[buffer(4)]], device const ushort* vs [[buffer(5)]],
                                  device const int* cells [[buffer(6)]], device const int* n_cells [[buffer(7)]],
                                  device const float* gates [[buffer(8)]], device float* out [[buffer(9)]],
                                  threadgroup float* tg_s [[threadgroup(0)]],
                                  threadgroup float* tg_ml [[threadgroup(1)]], STRATA_KPOS_PARAMS) {
  attn_fused_body<KvF32>(a, qh, k, ks, v, vs, cells, n_cells, gates, out, tg_s, tg_ml, STRATA_KPOS);
}
