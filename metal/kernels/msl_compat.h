#pragma once
// One source, two targets. Kernel bodies (metal/kernels/*.h) are written in the common subset
// of Metal Shading Language and C++20. Under the Metal compiler (__METAL_VERSION__) this header only
// pulls in metal_stdlib; in C++ it maps the MSL spellings onto the emulator (metal/emu/):
//   address spaces   kernel, device, thread -> nothing; constant -> const; threadgroup -> nothing
//   threadgroup ptr  TGP(T): `threadgroup T*` in MSL, emu::tg_ptr<T> (checked, race-tracked) in C++
//   barriers         threadgroup_barrier(mem_flags::mem_threadgroup), simdgroup_barrier(...)
//   SIMD groups      simd_sum/max/min/product/and/or/xor, simd_prefix_{ex,in}clusive_sum,
//                    simd_shuffle{,_xor,_up,_down}, simd_broadcast{,_first}, simd_any/all/ballot
//   types            half (IEEE binary16 storage, converts through float), uint, ushort, uchar
//   functions        metal::exp/sqrt/rsqrt/max/min/clamp/abs/fabs/rint/floor/fma/..., as_type<T>
// Rules for bodies: threadgroup memory arrives as a TGP(T) parameter (never declared inside a body);
// math is qualified (metal::exp); no arithmetic in half (convert to float first); 1-D threadgroups.
// In C++ include this header after every standard header and close with msl_compat_end.h: the
// address-space words are macros (`thread` would break <thread>).

#if defined(__METAL_VERSION__)

#include <metal_stdlib>
using namespace metal;
#define TGP(T) threadgroup T*

#else  // C++: the emulator

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "metal/emu/emulator.h"
#include "strata/util/fp16.h"

#define kernel
#define device
#define constant const
#define thread
#define threadgroup
#define TGP(T) ::strata::emu::tg_ptr<T>

// IEEE binary16 storage: converts to and from float exactly as the GPU does (round to nearest even,
// subnormals kept). Kernels never do arithmetic in half.
struct half {
  uint16_t bits;
  half() = default;
  half(float f) : bits(strata::fp32_to_fp16(f)) {}  // NOLINT: implicit like the MSL conversion
  operator float() const { return strata::fp16_to_fp32(bits); }
};
static_assert(sizeof(half) == 2);

using uint = unsigned int;
using ushort = unsigned short;
using uchar = unsigned char;
using ulong = unsigned long;
static_assert(sizeof(ulong) == 8, "MSL ulong is 64 bits");

// float4 with the element-wise operators the kernels use (vector loads of the fast paths).
struct float4 {
  float x, y, z, w;
  float4() = default;
  constexpr float4(float a, float b, float c, float d) : x(a), y(b), z(c), w(d) {}
  explicit constexpr float4(float a) : x(a), y(a), z(a), w(a) {}
  float& operator[](int i) { return (&x)[i]; }
  float operator[](int i) const { return (&x)[i]; }
};
static_assert(sizeof(float4) == 16);
inline float4 operator+(float4 a, float4 b) { return float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
inline float4 operator-(float4 a, float4 b) { return float4(a.x - b.x, a.y - b.y, a.z - b.z, a.w - b.w); }
inline float4 operator*(float4 a, float4 b) { return float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w); }
inline float4 operator*(float s, float4 b) { return float4(s * b.x, s * b.y, s * b.z, s * b.w); }
inline float4 operator*(float4 a, float s) { return float4(a.x * s, a.y * s, a.z * s, a.w * s); }
inline float4& operator+=(float4& a, float4 b) { return a = a + b; }

namespace metal {

enum class mem_flags : uint32_t { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) {
  return static_cast<mem_flags>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
inline void threadgroup_barrier(mem_flags) { strata::emu::threadgroup_barrier_impl(); }
inline void simdgroup_barrier(mem_flags) { strata::emu::simdgroup_barrier_impl(); }

template <class To, class From>
inline To as_type(From v) {
  static_assert(sizeof(To) == sizeof(From), "as_type needs equal sizes");
  return std::bit_cast<To>(v);
}

namespace detail {
template <class T>
constexpr strata::emu::SimdType simd_type() {
  static_assert(sizeof(T) == 4 && (std::is_same_v<T, float> || std::is_integral_v<T>),
                "the emulator's SIMD collectives take 32-bit float, int or uint");
  if constexpr (std::is_same_v<T, float>)
    return strata::emu::SimdType::F32;
  else if constexpr (std::is_signed_v<T>)
    return strata::emu::SimdType::I32;
  else
    return strata::emu::SimdType::U32;
}
template <class T>
inline T collective(strata::emu::SimdOp op, T v, uint32_t arg = 0) {
  return std::bit_cast<T>(strata::emu::simd_collective(op, simd_type<T>(), std::bit_cast<uint32_t>(v), arg));
}
}  // namespace detail

template <class T>
inline T simd_sum(T v) {
  return detail::collective(strata::emu::SimdOp::Sum, v);
}
template <class T>
inline T simd_product(T v) {
  return detail::collective(strata::emu::SimdOp::Product, v);
}
template <class T>
inline T simd_max(T v) {
  return detail::collective(strata::emu::SimdOp::Max, v);
}
template <class T>
inline T simd_min(T v) {
  return detail::collective(strata::emu::SimdOp::Min, v);
}
template <class T>
inline T simd_and(T v) {
  return detail::collective(strata::emu::SimdOp::And, v);
}
template <class T>
inline T simd_or(T v) {
  return detail::collective(strata::emu::SimdOp::Or, v);
}
template <class T>
inline T simd_xor(T v) {
  return detail::collective(strata::emu::SimdOp::Xor, v);
}
template <class T>
inline T simd_prefix_exclusive_sum(T v) {
  return detail::collective(strata::emu::SimdOp::PrefixExclusiveSum, v);
}
template <class T>
inline T simd_prefix_inclusive_sum(T v) {
  return detail::collective(strata::emu::SimdOp::PrefixInclusiveSum, v);
}
template <class T>
inline T simd_shuffle(T v, ushort lane) {
  return detail::collective(strata::emu::SimdOp::Shuffle, v, lane);
}
template <class T>
inline T simd_shuffle_xor(T v, ushort mask) {
  return detail::collective(strata::emu::SimdOp::ShuffleXor, v, mask);
}
template <class T>
inline T simd_shuffle_up(T v, ushort delta) {
  return detail::collective(strata::emu::SimdOp::ShuffleUp, v, delta);
}
template <class T>
inline T simd_shuffle_down(T v, ushort delta) {
  return detail::collective(strata::emu::SimdOp::ShuffleDown, v, delta);
}
template <class T>
inline T simd_broadcast(T v, ushort lane) {
  return detail::collective(strata::emu::SimdOp::Broadcast, v, lane);
}
template <class T>
inline T simd_broadcast_first(T v) {
  return detail::collective(strata::emu::SimdOp::BroadcastFirst, v);
}
inline bool simd_any(bool p) { return detail::collective<uint32_t>(strata::emu::SimdOp::Any, p ? 1u : 0u) != 0; }
inline bool simd_all(bool p) { return detail::collective<uint32_t>(strata::emu::SimdOp::All, p ? 1u : 0u) != 0; }
struct simd_vote {
  uint64_t v;
  explicit operator uint64_t() const { return v; }
};
inline simd_vote simd_ballot(bool p) { return simd_vote{strata::emu::simd_ballot_impl(p)}; }

// Math: float overloads as the kernels use them (integer max/min/clamp/abs too).
inline float exp(float x) { return std::exp(x); }
inline float exp2(float x) { return std::exp2(x); }
inline float log(float x) { return std::log(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float fabs(float x) { return std::fabs(x); }
inline float abs(float x) { return std::fabs(x); }
inline int abs(int x) { return x < 0 ? -x : x; }
inline float rint(float x) { return std::nearbyint(x); }  // round half to even (default mode)
inline float floor(float x) { return std::floor(x); }
inline float ceil(float x) { return std::ceil(x); }
inline float trunc(float x) { return std::trunc(x); }
inline float fma(float a, float b, float c) { return std::fma(a, b, c); }
inline float cos(float x) { return std::cos(x); }
inline float sin(float x) { return std::sin(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float pow(float x, float y) { return std::pow(x, y); }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
inline float fmax(float a, float b) { return std::fmax(a, b); }
inline float fmin(float a, float b) { return std::fmin(a, b); }
template <class T>
inline T max(T a, T b) {
  return a > b ? a : b;
}
template <class T>
inline T min(T a, T b) {
  return a < b ? a : b;
}
template <class T>
inline T clamp(T x, T lo, T hi) {
  return min(max(x, lo), hi);
}
template <class T>
inline T select(T a, T b, bool c) {
  return c ? b : a;
}
inline uint popcount(uint x) { return static_cast<uint>(std::popcount(x)); }
inline uint clz(uint x) { return static_cast<uint>(std::countl_zero(x)); }
inline uint64_t clz(uint64_t x) { return static_cast<uint64_t>(std::countl_zero(x)); }
inline uint ctz(uint x) { return static_cast<uint>(std::countr_zero(x)); }

namespace precise {
inline float exp(float x) { return std::exp(x); }
inline float sqrt(float x) { return std::sqrt(x); }
inline float divide(float a, float b) { return a / b; }
}  // namespace precise

}  // namespace metal

using metal::as_type;
using metal::clz;
using metal::ctz;
using metal::mem_flags;
using metal::popcount;
using metal::simd_all;
using metal::simd_and;
using metal::simd_any;
using metal::simd_ballot;
using metal::simd_broadcast;
using metal::simd_broadcast_first;
using metal::simd_max;
using metal::simd_min;
using metal::simd_or;
using metal::simd_prefix_exclusive_sum;
using metal::simd_prefix_inclusive_sum;
using metal::simd_product;
using metal::simd_shuffle;
using metal::simd_shuffle_down;
using metal::simd_shuffle_up;
using metal::simd_shuffle_xor;
using metal::simd_sum;
using metal::simd_xor;
using metal::simdgroup_barrier;
using metal::threadgroup_barrier;

#endif
