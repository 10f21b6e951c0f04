// The AVX2 attention kernels (engine/attention_kernels.h): engine/x86/attention_kernels_x86.h with
// 16 ymm registers, so passes of up to three query heads (four cells' dots for three heads are
// twelve accumulators, plus three query chunks). Bitwise equal to the portable kernels.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "strata/engine/x86/attention_kernels_x86.h"

namespace strata::engine {
namespace {

constexpr AttnKernels kAvx2 = x86::table</*MaxG=*/3, /*Regs=*/16>();

}  // namespace

const AttnKernels& attn_kernels_avx2() { return kAvx2; }

}  // namespace strata::engine
