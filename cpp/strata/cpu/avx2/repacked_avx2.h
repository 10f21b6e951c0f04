#pragma once
// Helpers the AVX2 kernels of the repacked types share (cpu/repack/layout.h; compiled with -mavx2,
// internal linkage as simd_avx2.h): the 6-bit scale codes unpacked, scales spread into both int16
// halves of a lane for vpmaddwd, and a 16-row group's two 8-row halves stored.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "strata/cpu/avx2/simd_avx2.h"
#include "strata/cpu/repack/layout.h"

namespace strata::cpu::avx2 {
namespace {

// The 128 6-bit values packed at p (layout.h, pack6) minus Bias into out[0 .. 128) (32-byte aligned).
template <int Bias = 0, class T>
inline void unpack6(const uint8_t* p, T* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  const __m256i lo0 = loadu256(p), lo1 = loadu256(p + 32), hi = loadu256(p + 64);
  auto top = [&](int shift) { return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, shift), m2), 4); };
  auto put = [out](int at, __m256i v) {
    if constexpr (Bias != 0) v = _mm256_sub_epi8(v, _mm256_set1_epi8(static_cast<char>(Bias)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + at), v);
  };
  put(0, _mm256_or_si256(_mm256_and_si256(lo0, m4), top(0)));
  put(32, _mm256_or_si256(_mm256_and_si256(lo1, m4), top(2)));
  put(64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), m4), top(4)));
  put(96, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), m4), top(6)));
}

// Eight unsigned scales (bytes at p) as int32 lanes holding the scale in both int16 halves.
inline __m256i scales_dup(const uint8_t* p) {
  const __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}

// Eight int8 scales (bytes at p) as int32 lanes holding the scale in both int16 halves.
inline __m256i scales_dup(const int8_t* p) {
  const __m256i s = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s, 16));
}

// int16 e (0 or 1) of every 32-bit lane of v in both int16 halves of the lane.
inline __m256i half_dup(__m256i v, int e) {
  return e == 0 ? _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(v, 0xA0), 0xA0)
                : _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(v, 0xF5), 0xF5);
}

// A group's accumulators of rows 0..7 and 8..15 into out[0 .. n_valid).
inline void store_rows(__m256 lo, __m256 hi, float* out, int n_valid) {
  if (n_valid == repack::kRows) {  // every group but a matrix's last: no memcpy call of a run-time size
    _mm256_storeu_ps(out, lo);
    _mm256_storeu_ps(out + 8, hi);
    return;
  }
  alignas(32) float tmp[repack::kRows];
  _mm256_store_ps(tmp, lo);
  _mm256_store_ps(tmp + 8, hi);
  std::memcpy(out, tmp, static_cast<std::size_t>(n_valid) * sizeof(float));
}

}  // namespace
}  // namespace strata::cpu::avx2
