#include "metal/host/dispatch.h"

#include <string>

#include "strata/util/error.h"

namespace strata::mtl {
namespace {

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

[[noreturn]] void bad(const std::string& what) { throw_error(ErrorKind::Value, "metal dispatch: " + what); }

}  // namespace

void encode_route(Device& dev, const RouteArgs& a, BufferRef x, BufferRef resident, BufferRef ids, BufferRef weights,
                  BufferRef status) {
  if (a.n_experts < 1 || a.n_experts > kRouteMaxExperts)
    bad("router: " + std::to_string(a.n_experts) + " experts (the kernel takes 1.." + std::to_string(kRouteMaxExperts) + ")");
  if (a.k < 1 || a.k > a.n_experts || a.k > kRouteMaxK)
    bad("router: k = " + std::to_string(a.k) + " must be in [1, min(E, " + std::to_string(kRouteMaxK) + ")]");
  if (a.row_stride < a.n_experts) bad("router: row stride below E");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_route_rows"));
  set_args(e, 0, a);
  e.set_buffer(1, x);
  e.set_buffer(2, a.has_resident ? resident : x);  // bound either way (Metal's validation wants it)
  e.set_buffer(3, ids);
  e.set_buffer(4, weights);
  e.set_buffer(5, status);
  e.set_threadgroup_memory(0, a.softmax ? kRouteRowsPerGroup * (a.n_experts + 1) * 4 : 16);
  e.dispatch(Dim3{ceil_div(a.n_rows, kRouteRowsPerGroup), 1, 1}, Dim3{32 * kRouteRowsPerGroup, 1, 1});
}

void encode_plan(Device& dev, const PlanArgs& a, BufferRef ids, BufferRef resident, BufferRef header,
                 BufferRef group_expert, BufferRef group_offset, BufferRef slot_entry, BufferRef entry_slot) {
  if (a.n_experts < 1 || a.n_experts > kRouteMaxExperts)
    bad("plan: " + std::to_string(a.n_experts) + " experts (the kernel takes 1.." + std::to_string(kRouteMaxExperts) + ")");
  if (a.n_entries > kPlanMaxEntries) bad("plan: " + std::to_string(a.n_entries) + " entries (at most 65535)");
  if (a.k < 1) bad("plan: k must be >= 1");
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_plan"));
  set_args(e, 0, a);
  e.set_buffer(1, ids);
  e.set_buffer(2, a.has_resident ? resident : ids);
  e.set_buffer(3, header);
  e.set_buffer(4, group_expert);
  e.set_buffer(5, group_offset);
  e.set_buffer(6, slot_entry);
  e.set_buffer(7, entry_slot);
  e.set_threadgroup_memory(0, a.n_experts * 4);
  e.set_threadgroup_memory(1, a.n_experts * 4);
  e.set_threadgroup_memory(2, a.n_experts * 4);
  e.set_threadgroup_memory(3, (kPlanThreads / 32 + 1) * 4);
  e.dispatch(Dim3{1, 1, 1}, Dim3{kPlanThreads, 1, 1});
}

const char* combine_kernel(uint32_t d, uint32_t n, bool use_fast) {
  return use_fast && combine_has_fast_path(d, n) ? "strata_combine_fast_2560x4" : "strata_combine_generic";
}

void encode_combine(Device& dev, const CombineArgs& a, const CombineBuffers& b, bool use_fast) {
  if (a.n < 1 || a.n > 64) bad("combine: " + std::to_string(a.n) + " streams (1..64)");
  if (a.n_tok == 0 || a.d == 0) return;
  Encoder& e = dev.encoder();
  const bool fast = use_fast && combine_has_fast_path(a.d, a.n);
  e.set_pipeline(dev.pipeline(combine_kernel(a.d, a.n, use_fast)));
  set_args(e, 0, a);
  e.set_buffer(1, b.routed);
  e.set_buffer(2, b.weights);
  e.set_buffer(3, a.has_shared ? b.shared : b.routed);
  e.set_buffer(4, a.has_shared ? b.shared_gate : b.weights);
  e.set_buffer(5, b.post);
  e.set_buffer(6, b.comb);
  e.set_buffer(7, b.x_in);
  e.set_buffer(8, b.x_out);
  const uint32_t threads = 128;
  const uint32_t per_tok = fast ? a.d / 4 : a.d;
  e.dispatch(Dim3{ceil_div(per_tok, threads), a.n_tok, 1}, Dim3{threads, 1, 1});
}

void encode_rms(Device& dev, const RmsArgs& a, BufferRef x, BufferRef w, BufferRef out) {
  if (a.n == 0) bad("rms: empty rows");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_rms_rows"));
  set_args(e, 0, a);
  e.set_buffer(1, x);
  e.set_buffer(2, a.has_weight ? w : x);
  e.set_buffer(3, out);
  e.set_threadgroup_memory(0, (kRmsThreads / 32 + 1) * 4);
  e.dispatch(Dim3{a.n_rows, 1, 1}, Dim3{kRmsThreads, 1, 1});
}

void encode_hc_collapse(Device& dev, const HcArgs& a, BufferRef mix, BufferRef scale, BufferRef base, BufferRef X,
                        BufferRef post, BufferRef comb, BufferRef out) {
  if (a.n < 1 || a.n > 16) bad("hyper-connection: " + std::to_string(a.n) + " streams (the kernel takes 1..16)");
  if (a.n_rows == 0) return;
  Encoder& e = dev.encoder();
  e.set_pipeline(dev.pipeline("strata_hc_collapse"));
  set_args(e, 0, a);
  e.set_buffer(1, mix);
  e.set_buffer(2, scale);
  e.set_buffer(3, base);
  e.set_buffer(4, X);
  e.set_buffer(5, a.head ? out : post);
  e.set_buffer(6, a.head ? out : comb);
  e.set_buffer(7, out);
  e.set_threadgroup_memory(0, a.n * 4);
  e.dispatch(Dim3{a.n_rows, 1, 1}, Dim3{kHcThreads, 1, 1});
}

}  // namespace strata::mtl
