#pragma once
// The dispatch plan of the Metal backend: for each kernel, the pipeline (and its function
// constants), the argument block, buffer indices and offsets, threadgroup memory, grid and
// threadgroup sizes — written once against the encoder interface (device.h), run by the emulator on
// Linux and by metal-cpp on a Mac. Shape limits are checked here (strata::Error(Value) naming the
// limit), so a kernel never sees a launch it cannot handle.
#include <cstdint>

#include "metal/host/device.h"
#include "metal/kernels/args.h"

namespace strata::mtl {

// ---- routing

inline constexpr uint32_t kRouteRowsPerGroup = 4;   // SIMD groups (rows) per threadgroup
inline constexpr uint32_t kRouteMaxExperts = 1024;
inline constexpr uint32_t kRouteMaxK = 64;
// x: [n_rows][row_stride] probabilities (or logits with a.softmax); resident: E bytes per row
// (resident_stride apart) or unbound when !has_resident; ids/weights: [n_rows][k]; status: [n_rows].
void encode_route(Device& dev, const RouteArgs& a, BufferRef x, BufferRef resident, BufferRef ids, BufferRef weights,
                  BufferRef status);

inline constexpr uint32_t kPlanThreads = 256;
inline constexpr uint32_t kPlanMaxEntries = 65535;
// ids: [n_entries]; header: one PlanHeader; group_expert: [min(E, n_entries)]; group_offset: that + 1;
// slot_entry, entry_slot: [n_entries].
void encode_plan(Device& dev, const PlanArgs& a, BufferRef ids, BufferRef resident, BufferRef header,
                 BufferRef group_expert, BufferRef group_offset, BufferRef slot_entry, BufferRef entry_slot);

// ---- residual path

struct CombineBuffers {
  BufferRef routed, weights, shared, shared_gate, post, comb, x_in, x_out;
};
inline bool combine_has_fast_path(uint32_t d, uint32_t n) { return d == 2560 && n == 4; }
// The kernel encode_combine picks for a shape.
const char* combine_kernel(uint32_t d, uint32_t n, bool use_fast = true);
// use_fast: take the fixed-shape kernel when the shape has one (false forces the generic kernel).
void encode_combine(Device& dev, const CombineArgs& a, const CombineBuffers& b, bool use_fast = true);

inline constexpr uint32_t kRmsThreads = 256;
void encode_rms(Device& dev, const RmsArgs& a, BufferRef x, BufferRef w, BufferRef out);

inline constexpr uint32_t kHcThreads = 256;
void encode_hc_collapse(Device& dev, const HcArgs& a, BufferRef mix, BufferRef scale, BufferRef base, BufferRef X,
                        BufferRef post, BufferRef comb, BufferRef out);

}  // namespace strata::mtl
