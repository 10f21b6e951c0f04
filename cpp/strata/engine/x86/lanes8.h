#pragma once
// 8-lane helpers shared by the engine's files built with AVX2 (engine/avx2/, engine/avx512/ and the
// kernels of engine/x86/). Internal linkage, as in attention_kernels_x86.h: every including file has
// its own copy compiled with its own ISA flags, so the linker can never hand a baseline or AVX2 caller
// a copy built for a wider ISA.
#include <immintrin.h>

namespace strata::engine::x86 {
namespace {

// Lanes [0, t) set (t <= 8): the mask of _mm256_maskload_ps / _mm256_maskstore_ps for a tail of t elements.
inline __m256i tail_mask(int t) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(t), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace
}  // namespace strata::engine::x86
