#pragma once
// AVX-512 helpers shared by the files of this folder only (compiled with -mavx512f -mavx512bw
// -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c; nothing here may be included from a
// baseline translation unit). Internal linkage, so the linker can never hand AVX-512 code to a
// baseline caller.
// GCC 12 reports its own AVX-512 casts (_mm512_castps512_ps256, _mm512_cvtph_ps, ...) as reading
// an uninitialized value (the header's __Y = __Y idiom); the diagnostic is placed in the header.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace strata::cpu::avx512 {
namespace {

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

inline __m512i loadu512(const void* p) { return _mm512_loadu_si512(p); }
// A load the compiler may not fold into its users: GCC folds a vector used by two instructions (a low
// and a high nibble mask) into both as memory operands, so each 64 bytes are read twice. Zen 4 runs
// the repacked Q4_0 kernel from L2 ~20 % faster with one load (docs/benchmarks.md, session 10).
inline __m512i load512_once(const void* p) {
  __m512i v = _mm512_loadu_si512(p);
  __asm__("" : "+v"(v));
  return v;
}
// A load issued where it stands: volatile asm statements keep their order, so a kernel that loads a
// block's 64-byte lines through this reads them in the order written. GCC scheduled the repacked Q8_0
// kernel's eight loads per block as lines 0, 6, 5, 4, 2, 1, 3, 7; on Zen 4 that streamed 16-20 GB/s
// from DRAM where ascending lines stream 22-26 (one thread, expert-sized matrices); an Intel Xeon
// streamed the same in either order. The operand is typed unaligned (__m512i_u): blocks may start 32
// bytes into a line.
inline __m512i load512_in_order(const void* p) {
  __m512i v;
  __asm__ volatile("vmovdqu64 %1, %0" : "=v"(v) : "m"(*static_cast<const __m512i_u*>(p)));
  return v;
}
inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i loadu128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 32 bytes at p in the low half, 32 bytes at q in the high half.
inline __m512i load2x256(const void* p, const void* q) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(loadu256(p)), loadu256(q), 1);
}
// 32 bytes at p in the low half, zeros above.
inline __m512i load256_z(const void* p) { return _mm512_zextsi256_si512(loadu256(p)); }

inline float hsum(__m512 x) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline int hsum_i32(__m512i x) {
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1));
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(r);
}

inline float hmax(__m512 x) {
  const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline __m512 abs_ps(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}

// Eight fp16 scales at a stride of `stride` bytes -> f32.
inline __m256 load_scales8(const uint8_t* p, std::size_t stride) {
  uint16_t h[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&h[k], p + static_cast<std::size_t>(k) * stride, 2);
  return _mm256_cvtph_ps(loadu128(h));
}

// The 4 bytes at p in every 32-bit lane (an activation word for the repacked kernels' VNNI dots).
inline __m512i bcast_word(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc + vpdpbusd(w, bcast_word(p)) with the broadcast folded into the instruction's memory operand
// ({1to16}): one instruction instead of a broadcast and a vpdpbusd (GCC does not fold
// _mm512_set1_epi32 into vpdpbusd). Same integers. The Q4_0_R16 GEMV read from L2 ran ~10 % faster.
// The memory operand is typed as 4 chars: any alignment, aliases the int8 activation bytes.
struct Bytes4 {
  char b[4];
};
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const void* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*static_cast<const Bytes4*>(p)));
  return acc;
}

// The first n_valid of 16 row results (a repacked group of 16 rows; fewer in the matrix's last group).
inline void store_rows(float* out, __m512 v, int n_valid) {
  if (n_valid == 16)
    _mm512_storeu_ps(out, v);
  else
    _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << n_valid) - 1), v);
}

}  // namespace
}  // namespace strata::cpu::avx512
