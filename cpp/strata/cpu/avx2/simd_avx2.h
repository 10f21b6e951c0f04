#pragma once
// AVX2 helpers shared by the files of this folder only (they are compiled with -mavx2 -mfma
// -mf16c; nothing here may be included from a baseline translation unit). Everything has internal
// linkage so no AVX2 code can be picked by the linker for a baseline caller.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace strata::cpu::avx2 {
namespace {

inline float fp16(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 x) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline int hsum_i32(__m256i x) {
  __m128i r = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(1, 0, 3, 2)));
  r = _mm_add_epi32(r, _mm_shuffle_epi32(r, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(r);
}

inline float hmax_abs(__m256 x) {
  __m128 r = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  r = _mm_max_ps(r, _mm_movehl_ps(r, r));
  r = _mm_max_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

inline __m256 abs_ps(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }

inline __m256i loadu256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m128i loadu128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

// 32 nibbles -> 32 bytes: the 16 low nibbles first, then the 16 high nibbles.
inline __m256i bytes_from_nibbles_32(const uint8_t* p) {
  const __m128i tmp = loadu128(p);
  const __m256i bytes = _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp);
  return _mm256_and_si256(_mm256_set1_epi8(0x0F), bytes);
}

// 32 bits -> 32 bytes, 0xFF where the bit is set.
inline __m256i bytes_from_bits_32(const uint8_t* p) {
  uint32_t x32;
  std::memcpy(&x32, p, 4);
  const __m256i shuf =
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// Signed int8 x signed int8 -> int16 sums of adjacent pairs via maddubs(|x|, sign(y, x)). x may
// hold -128 (|x| reads as unsigned 128); y must not (activation bytes are within ±127), so no pair
// sum exceeds 2·128·127 < 2^15.
inline __m256i mul_add_epi8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  return _mm256_maddubs_epi16(ax, sy);
}

inline __m256 sum_i16_pairs_float(__m256i x) { return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), x)); }

inline __m256 mul_sum_i8_pairs_float(__m256i x, __m256i y) { return sum_i16_pairs_float(mul_add_epi8(x, y)); }

// The 4 bytes at p in every 32-bit lane (an activation word for the repacked kernels' VNNI-style dots).
inline __m256i bcast_word(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

}  // namespace
}  // namespace strata::cpu::avx2
