// Metal entry points of the routing kernels (thin: the bodies are in router.h and plan.h, shared
// with the C++ emulator; the twins are in metal/emu/kernels_emu.cpp).
#include "metal/kernels/plan.h"
#include "metal/kernels/router.h"

kernel void strata_route_rows(constant RouteArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                              device const uchar* resident [[buffer(2)]], device int* ids [[buffer(3)]],
                              device float* weights [[buffer(4)]], device int* status [[buffer(5)]],
                              threadgroup float* scratch [[threadgroup(0)]], STRATA_KPOS_PARAMS) {
  route_rows_body(a, x, resident, ids, weights, status, scratch, STRATA_KPOS);
}

kernel void strata_plan(constant PlanArgs& a [[buffer(0)]], device const int* ids [[buffer(1)]],
                        device const uchar* resident [[buffer(2)]], device PlanHeader* hdr [[buffer(3)]],
                        device int* group_expert [[buffer(4)]], device int* group_offset [[buffer(5)]],
                        device int* slot_entry [[buffer(6)]], device int* entry_slot [[buffer(7)]],
                        threadgroup uint* count [[threadgroup(0)]], threadgroup uint* base [[threadgroup(1)]],
                        threadgroup uint* gidx [[threadgroup(2)]], threadgroup uint* tmp [[threadgroup(3)]],
                        STRATA_KPOS_PARAMS) {
  plan_body(a, ids, resident, hdr, group_expert, group_offset, slot_entry, entry_slot, count, base, gidx, tmp,
            STRATA_KPOS);
}
