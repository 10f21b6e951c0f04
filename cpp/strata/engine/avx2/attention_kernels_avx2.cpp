// The AVX2 attention kernels (engine/attention_kernels.h): engine/x86/attention_kernels_x86.h with
// 16 ymm registers: scores of every whole four heads of a group in batches of two cells (eight
// accumulators, four query chunks, two cells' chunks), the one to three heads left in one pass over four
// cells; values in passes of four heads over 16 columns. Bitwise equal to the portable kernels.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "strata/engine/x86/attention_kernels_x86.h"

namespace strata::engine {
namespace {

constexpr AttnKernels kAvx2 = x86::table</*Regs=*/16>();

}  // namespace

const AttnKernels& attn_kernels_avx2() { return kAvx2; }

}  // namespace strata::engine
