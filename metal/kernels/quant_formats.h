#pragma once
// Block formats as the GPU reads them (byte-compatible with ggml, docs/quantization.md): each format
// decodes one "unit" — a run of consecutive elements of a row that share their scales — into floats
// with exactly the operations of ggml's dequantize_row_* (so the decode is bitwise
// quant::dequantize_row; tests/cpp/test_metal_gemv.cpp checks it through the get_rows kernel).
//   format   unit  block bytes / elements
//   F32        8    4 / 1          F16, BF16   8   2 / 1
//   Q8_0      32   34 / 32         Q4_0       32  18 / 32        Q5_0   32  22 / 32
//   Q4_K      32  144 / 256        Q6_K       16 210 / 256       Q2_K   16  84 / 256
//   Q5_1      32   24 / 32         IQ4_NL     32  18 / 32        IQ4_XS 32 136 / 256
//   Q3_K      16  110 / 256        Q5_K       32 176 / 256
//   IQ2_XS    16   74 / 256        IQ3_XXS    32  98 / 256       IQ2_XXS 32  66 / 256
// Multi-byte fields are read byte-wise or at their natural alignment (blocks are packed).
#include "metal/kernels/common.h"

inline ushort load_u16(device const uchar* p) { return ushort(p[0]) | ushort(ushort(p[1]) << 8); }
inline float load_half(device const uchar* p) { return half_bits_to_float(load_u16(p)); }

struct FmtF32 {
  enum : uint { kUnit = 8, kBlock = 1, kBlockBytes = 4 };
  static inline void decode(device const uchar* row, uint u, uint cols, thread float* w) {
    device const float* r = (device const float*)row;
    for (uint i = 0; i < kUnit; ++i) {
      const uint e = u * kUnit + i;
      w[i] = e < cols ? r[e] : 0.0f;
    }
  }
};

struct FmtF16 {
  enum : uint { kUnit = 8, kBlock = 1, kBlockBytes = 2 };
  static inline void decode(device const uchar* row, uint u, uint cols, thread float* w) {
    device const ushort* r = (device const ushort*)row;
    for (uint i = 0; i < kUnit; ++i) {
      const uint e = u * kUnit + i;
      w[i] = e < cols ? half_bits_to_float(r[e]) : 0.0f;
    }
  }
};

struct FmtBF16 {
  enum : uint { kUnit = 8, kBlock = 1, kBlockBytes = 2 };
  static inline void decode(device const uchar* row, uint u, uint cols, thread float* w) {
    device const ushort* r = (device const ushort*)row;
    for (uint i = 0; i < kUnit; ++i) {
      const uint e = u * kUnit + i;
      w[i] = e < cols ? bf16_bits_to_float(r[e]) : 0.0f;
    }
  }
};

struct FmtQ8_0 {
  enum : uint { kUnit = 32, kBlock = 32, kBlockBytes = 34 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + u * kBlockBytes;
    const float d = load_half(b);
    device const int8_t* qs = (device const int8_t*)(b + 2);
    for (uint i = 0; i < 32; ++i) w[i] = float(int(qs[i])) * d;
  }
};

struct FmtQ4_0 {
  enum : uint { kUnit = 32, kBlock = 32, kBlockBytes = 18 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + u * kBlockBytes;
    const float d = load_half(b);
    for (uint j = 0; j < 16; ++j) {
      const uchar q = b[2 + j];
      w[j] = d * float(int(q & 0xF) - 8);
      w[j + 16] = d * float(int(q >> 4) - 8);
    }
  }
};

struct FmtQ5_0 {
  enum : uint { kUnit = 32, kBlock = 32, kBlockBytes = 22 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + u * kBlockBytes;
    const float d = load_half(b);
    const uint qh = uint(b[2]) | (uint(b[3]) << 8) | (uint(b[4]) << 16) | (uint(b[5]) << 24);
    for (uint j = 0; j < 16; ++j) {
      const uchar q = b[6 + j];
      const int h0 = int((qh >> j) & 1u) << 4;
      const int h1 = int((qh >> (j + 16)) & 1u) << 4;
      w[j] = d * float((int(q & 0xF) | h0) - 16);
      w[j + 16] = d * float((int(q >> 4) | h1) - 16);
    }
  }
};

// x = d·q + m with q unsigned (0..31): two roundings, as dequantize_row (no contraction).
struct FmtQ5_1 {
  enum : uint { kUnit = 32, kBlock = 32, kBlockBytes = 24 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + u * kBlockBytes;
    const float d = load_half(b), m = load_half(b + 2);
    const uint qh = uint(b[4]) | (uint(b[5]) << 8) | (uint(b[6]) << 16) | (uint(b[7]) << 24);
    for (uint j = 0; j < 16; ++j) {
      const uchar q = b[8 + j];
      const int h0 = int((qh >> j) & 1u) << 4;
      const int h1 = int((qh >> (j + 16)) & 1u) << 4;
      w[j] = d * float(int(q & 0xF) | h0) + m;
      w[j + 16] = d * float(int(q >> 4) | h1) + m;
    }
  }
};

// Q4_K's 6-bit scale and min of group j (0..7) from the 12 packed bytes.
inline void q4k_scale_min(uint j, device const uchar* q, thread uint& sc, thread uint& m) {
  if (j < 4) {
    sc = q[j] & 63u;
    m = q[j + 4] & 63u;
  } else {
    sc = (q[j + 4] & 0xFu) | ((uint(q[j - 4]) >> 6) << 4);
    m = (uint(q[j + 4]) >> 4) | ((uint(q[j]) >> 6) << 4);
  }
}

struct FmtQ4_K {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 144 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint g = u % 8;
    const float d = load_half(b), dmin = load_half(b + 2);
    uint sc, m;
    q4k_scale_min(g, b + 4, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    device const uchar* q = b + 16 + 32 * (g / 2);
    const uint shift = (g % 2) * 4;
    for (uint l = 0; l < 32; ++l) w[l] = d1 * float((q[l] >> shift) & 0xFu) - m1;
  }
};

struct FmtQ6_K {
  enum : uint { kUnit = 16, kBlock = 256, kBlockBytes = 210 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 16) * kBlockBytes;
    const uint e0 = (u % 16) * 16;  // first element of the unit in the super-block
    const uint h = e0 / 128, qq = (e0 % 128) / 32, l0 = e0 % 32;
    device const uchar* ql = b + h * 64 + (qq & 1u) * 32;
    device const uchar* qh = b + 128 + h * 32;
    device const int8_t* sc = (device const int8_t*)(b + 192);
    const float d = load_half(b + 208);
    const float ds = d * float(int(sc[h * 8 + l0 / 16 + 2 * qq]));
    const uint lshift = qq >= 2 ? 4u : 0u, hshift = 2 * qq;
    for (uint i = 0; i < 16; ++i) {
      const uint l = l0 + i;
      const int q = int(((ql[l] >> lshift) & 0xFu) | (((uint(qh[l]) >> hshift) & 3u) << 4)) - 32;
      w[i] = ds * float(q);
    }
  }
};

struct FmtQ2_K {
  enum : uint { kUnit = 16, kBlock = 256, kBlockBytes = 84 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 16) * kBlockBytes;
    const uint e0 = (u % 16) * 16;
    const uint h = e0 / 128, j = (e0 % 128) / 32, half16 = (e0 % 32) / 16;
    const uint sc = b[u % 16];
    const float d = load_half(b + 80), dmin = load_half(b + 82);
    const float dl = d * float(sc & 0xFu), ml = dmin * float(sc >> 4);
    device const uchar* q = b + 16 + h * 32 + half16 * 16;
    for (uint l = 0; l < 16; ++l) w[l] = dl * float(int((q[l] >> (2 * j)) & 3u)) - ml;
  }
};

// Q3_K: scale j of the 16 (signed 6-bit, minus 32; quant::q3_k_scale) covers elements 16j .. 16j+15,
// which are bit pair s of qs[32h + l] and bit 4h + s of hmask[l] (h = j / 8, s = j % 8 / 2,
// l = 16 (j % 2) + i); a clear hmask bit subtracts 4. Layout: hmask[32], qs[64], scales[12], d.
struct FmtQ3_K {
  enum : uint { kUnit = 16, kBlock = 256, kBlockBytes = 110 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 16) * kBlockBytes;
    const uint j = u % 16, h = j / 8, s = (j % 8) / 2, l0 = 16 * (j % 2);
    device const uchar* sc = b + 96;
    const uint lo = (uint(sc[j % 8]) >> (4 * (j / 8))) & 0xFu;
    const uint hi = (uint(sc[8 + j % 4]) >> (2 * (j / 4))) & 3u;
    const float d = load_half(b + 108);
    const float dl = d * float(int(lo | (hi << 4)) - 32);
    device const uchar* q = b + 32 + 32 * h;
    const uint m = 1u << (4 * h + s);
    for (uint i = 0; i < 16; ++i) {
      const uint l = l0 + i;
      const int v = int((uint(q[l]) >> (2 * s)) & 3u) - ((b[l] & m) != 0u ? 0 : 4);
      w[i] = dl * float(v);
    }
  }
};

// Q5_K: Q4_K with a fifth bit, bit g of qh[l], OR-ed in. Layout: d, dmin, scales[12], qh[32], qs[128].
struct FmtQ5_K {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 176 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint g = u % 8;
    const float d = load_half(b), dmin = load_half(b + 2);
    uint sc, m;
    q4k_scale_min(g, b + 4, sc, m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    device const uchar* qh = b + 16;
    device const uchar* q = b + 48 + 32 * (g / 2);
    const uint shift = (g % 2) * 4;
    for (uint l = 0; l < 32; ++l) {
      const uint v = ((uint(q[l]) >> shift) & 0xFu) | (((uint(qh[l]) >> g) & 1u) << 4);
      w[l] = d1 * float(v) - m1;
    }
  }
};

constant int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

struct FmtIQ4_NL {
  enum : uint { kUnit = 32, kBlock = 32, kBlockBytes = 18 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + u * kBlockBytes;
    const float d = load_half(b);
    for (uint j = 0; j < 16; ++j) {
      const uchar q = b[2 + j];
      w[j] = d * float(int(kIq4nlValues[q & 0xFu]));
      w[j + 16] = d * float(int(kIq4nlValues[q >> 4]));
    }
  }
};

struct FmtIQ4_XS {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 136 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint ib = u % 8;
    const float d = load_half(b);
    const uint scales_h = load_u16(b + 2);
    const int ls = int(((uint(b[4 + ib / 2]) >> (4 * (ib % 2))) & 0xFu) | (((scales_h >> (2 * ib)) & 3u) << 4));
    const float dl = d * float(ls - 32);
    device const uchar* qs = b + 8 + 16 * ib;
    for (uint j = 0; j < 16; ++j) {
      w[j] = dl * float(int(kIq4nlValues[qs[j] & 0xFu]));
      w[j + 16] = dl * float(int(kIq4nlValues[qs[j] >> 4]));
    }
  }
};

// The IQ2_XXS / IQ2_XS / IQ3_XXS codebooks and the IQ sign table, copied from
// cpp/strata/quant/iq_grids.cpp (ggml's iq2xxs_grid, iq2xs_grid, iq3xxs_grid, ksigns_iq2xs);
// tests/cpp/test_metal_gemv.cpp checks they are equal.
constant ulong kIq2xxsGrid[256] = {
    0x0808080808080808, 0x080808080808082b, 0x0808080808081919, 0x0808080808082b08, 0x0808080808082b2b,
    0x0808080808190819, 0x0808080808191908, 0x08080808082b0808, 0x08080808082b082b, 0x08080808082b2b08,
    0x08080808082b2b2b, 0x0808080819080819, 0x0808080819081908, 0x0808080819190808, 0x0808080819192b08,
    0x08080808192b0819, 0x08080808192b1908, 0x080808082b080808, 0x080808082b08082b, 0x080808082b082b2b,
    0x080808082b2b082b, 0x0808081908080819, 0x0808081908081908, 0x0808081908190808, 0x0808081908191919,
    0x0808081919080808, 0x080808192b081908, 0x080808192b192b08, 0x0808082b08080808, 0x0808082b0808082b,
    0x0808082b082b082b, 0x0808082b2b08082b, 0x0808190808080819, 0x0808190808081908, 0x0808190808190808,
    0x08081908082b0819, 0x08081908082b1908, 0x0808190819080808, 0x080819081908082b, 0x0808190819082b08,
    0x08081908192b0808, 0x080819082b080819, 0x080819082b081908, 0x080819082b190808, 0x080819082b2b1908,
    0x0808191908080808, 0x080819190808082b, 0x0808191908082b08, 0x08081919082b0808, 0x080819191908192b,
    0x08081919192b2b19, 0x080819192b080808, 0x080819192b190819, 0x0808192b08082b19, 0x0808192b08190808,
    0x0808192b19080808, 0x0808192b2b081908, 0x0808192b2b2b1908, 0x08082b0808080808, 0x08082b0808081919,
    0x08082b0808082b08, 0x08082b0808191908, 0x08082b08082b2b08, 0x08082b0819080819, 0x08082b0819081908,
    0x08082b0819190808, 0x08082b081919082b, 0x08082b082b082b08, 0x08082b1908081908, 0x08082b1919080808,
    0x08082b2b0808082b, 0x08082b2b08191908, 0x0819080808080819, 0x0819080808081908, 0x0819080808190808,
    0x08190808082b0819, 0x0819080819080808, 0x08190808192b0808, 0x081908082b081908, 0x081908082b190808,
    0x081908082b191919, 0x0819081908080808, 0x0819081908082b08, 0x08190819082b0808, 0x0819081919190808,
    0x0819081919192b2b, 0x081908192b080808, 0x0819082b082b1908, 0x0819082b19081919, 0x0819190808080808,
    0x0819190808082b08, 0x08191908082b0808, 0x08191908082b1919, 0x0819190819082b19, 0x081919082b080808,
    0x0819191908192b08, 0x08191919192b082b, 0x0819192b08080808, 0x0819192b0819192b, 0x08192b0808080819,
    0x08192b0808081908, 0x08192b0808190808, 0x08192b0819080808, 0x08192b082b080819, 0x08192b1908080808,
    0x08192b1908081919, 0x08192b192b2b0808, 0x08192b2b19190819, 0x082b080808080808, 0x082b08080808082b,
    0x082b080808082b2b, 0x082b080819081908, 0x082b0808192b0819, 0x082b08082b080808, 0x082b08082b08082b,
    0x082b0819082b2b19, 0x082b081919082b08, 0x082b082b08080808, 0x082b082b0808082b, 0x082b190808080819,
    0x082b190808081908, 0x082b190808190808, 0x082b190819080808, 0x082b19081919192b, 0x082b191908080808,
    0x082b191919080819, 0x082b1919192b1908, 0x082b192b2b190808, 0x082b2b0808082b08, 0x082b2b08082b0808,
    0x082b2b082b191908, 0x082b2b2b19081908, 0x1908080808080819, 0x1908080808081908, 0x1908080808190808,
    0x1908080808192b08, 0x19080808082b0819, 0x19080808082b1908, 0x1908080819080808, 0x1908080819082b08,
    0x190808081919192b, 0x19080808192b0808, 0x190808082b080819, 0x190808082b081908, 0x190808082b190808,
    0x1908081908080808, 0x19080819082b0808, 0x19080819192b0819, 0x190808192b080808, 0x190808192b081919,
    0x1908082b08080819, 0x1908082b08190808, 0x1908082b19082b08, 0x1908082b1919192b, 0x1908082b192b2b08,
    0x1908190808080808, 0x1908190808082b08, 0x19081908082b0808, 0x190819082b080808, 0x190819082b192b19,
    0x190819190819082b, 0x19081919082b1908, 0x1908192b08080808, 0x19082b0808080819, 0x19082b0808081908,
    0x19082b0808190808, 0x19082b0819080808, 0x19082b0819081919, 0x19082b1908080808, 0x19082b1919192b08,
    0x19082b19192b0819, 0x19082b192b08082b, 0x19082b2b19081919, 0x19082b2b2b190808, 0x1919080808080808,
    0x1919080808082b08, 0x1919080808190819, 0x1919080808192b19, 0x19190808082b0808, 0x191908082b080808,
    0x191908082b082b08, 0x1919081908081908, 0x191908191908082b, 0x191908192b2b1908, 0x1919082b2b190819,
    0x191919082b190808, 0x191919082b19082b, 0x1919191908082b2b, 0x1919192b08080819, 0x1919192b19191908,
    0x19192b0808080808, 0x19192b0808190819, 0x19192b0808192b19, 0x19192b08192b1908, 0x19192b1919080808,
    0x19192b2b08082b08, 0x192b080808081908, 0x192b080808190808, 0x192b080819080808, 0x192b0808192b2b08,
    0x192b081908080808, 0x192b081919191919, 0x192b082b08192b08, 0x192b082b192b0808, 0x192b190808080808,
    0x192b190808081919, 0x192b191908190808, 0x192b19190819082b, 0x192b19192b081908, 0x192b2b081908082b,
    0x2b08080808080808, 0x2b0808080808082b, 0x2b08080808082b2b, 0x2b08080819080819, 0x2b0808082b08082b,
    0x2b08081908081908, 0x2b08081908192b08, 0x2b08081919080808, 0x2b08082b08190819, 0x2b08190808080819,
    0x2b08190808081908, 0x2b08190808190808, 0x2b08190808191919, 0x2b08190819080808, 0x2b081908192b0808,
    0x2b08191908080808, 0x2b0819191908192b, 0x2b0819192b191908, 0x2b08192b08082b19, 0x2b08192b19080808,
    0x2b08192b192b0808, 0x2b082b080808082b, 0x2b082b1908081908, 0x2b082b2b08190819, 0x2b19080808081908,
    0x2b19080808190808, 0x2b190808082b1908, 0x2b19080819080808, 0x2b1908082b2b0819, 0x2b1908190819192b,
    0x2b1908192b080808, 0x2b19082b19081919, 0x2b19190808080808, 0x2b191908082b082b, 0x2b19190819081908,
    0x2b19191919190819, 0x2b192b082b080819, 0x2b192b19082b0808, 0x2b2b08080808082b, 0x2b2b080819190808,
    0x2b2b08082b081919, 0x2b2b081908082b19, 0x2b2b082b08080808, 0x2b2b190808192b08, 0x2b2b2b0819190808,
    0x2b2b2b1908081908};

constant ulong kIq2xsGrid[512] = {
    0x0808080808080808, 0x080808080808082b, 0x0808080808081919, 0x0808080808082b08, 0x0808080808082b2b,
    0x0808080808190819, 0x0808080808191908, 0x080808080819192b, 0x0808080808192b19, 0x08080808082b0808,
    0x08080808082b082b, 0x08080808082b1919, 0x08080808082b2b08, 0x0808080819080819, 0x0808080819081908,
    0x080808081908192b, 0x0808080819082b19, 0x0808080819190808, 0x080808081919082b, 0x0808080819191919,
    0x0808080819192b08, 0x08080808192b0819, 0x08080808192b1908, 0x080808082b080808, 0x080808082b08082b,
    0x080808082b081919, 0x080808082b082b08, 0x080808082b190819, 0x080808082b191908, 0x080808082b192b19,
    0x080808082b2b0808, 0x0808081908080819, 0x0808081908081908, 0x080808190808192b, 0x0808081908082b19,
    0x0808081908190808, 0x080808190819082b, 0x0808081908191919, 0x0808081908192b08, 0x0808081908192b2b,
    0x08080819082b0819, 0x08080819082b1908, 0x0808081919080808, 0x080808191908082b, 0x0808081919081919,
    0x0808081919082b08, 0x0808081919190819, 0x0808081919191908, 0x08080819192b0808, 0x08080819192b2b08,
    0x080808192b080819, 0x080808192b081908, 0x080808192b190808, 0x0808082b08080808, 0x0808082b0808082b,
    0x0808082b08081919, 0x0808082b08082b08, 0x0808082b08190819, 0x0808082b08191908, 0x0808082b082b0808,
    0x0808082b19080819, 0x0808082b19081908, 0x0808082b19190808, 0x0808082b19191919, 0x0808082b2b080808,
    0x0808082b2b082b2b, 0x0808190808080819, 0x0808190808081908, 0x080819080808192b, 0x0808190808082b19,
    0x0808190808190808, 0x080819080819082b, 0x0808190808191919, 0x0808190808192b08, 0x08081908082b0819,
    0x08081908082b1908, 0x0808190819080808, 0x080819081908082b, 0x0808190819081919, 0x0808190819082b08,
    0x0808190819190819, 0x0808190819191908, 0x080819081919192b, 0x08081908192b0808, 0x080819082b080819,
    0x080819082b081908, 0x080819082b190808, 0x0808191908080808, 0x080819190808082b, 0x0808191908081919,
    0x0808191908082b08, 0x0808191908190819, 0x0808191908191908, 0x08081919082b0808, 0x0808191919080819,
    0x0808191919081908, 0x0808191919190808, 0x08081919192b0819, 0x080819192b080808, 0x0808192b08080819,
    0x0808192b08081908, 0x0808192b08190808, 0x0808192b082b192b, 0x0808192b19080808, 0x0808192b1908082b,
    0x0808192b2b081908, 0x08082b0808080808, 0x08082b080808082b, 0x08082b0808081919, 0x08082b0808082b08,
    0x08082b0808082b2b, 0x08082b0808190819, 0x08082b0808191908, 0x08082b08082b0808, 0x08082b08082b1919,
    0x08082b0819080819, 0x08082b0819081908, 0x08082b0819190808, 0x08082b0819192b08, 0x08082b082b080808,
    0x08082b082b2b0808, 0x08082b082b2b2b2b, 0x08082b1908080819, 0x08082b1908081908, 0x08082b1908190808,
    0x08082b1919080808, 0x08082b192b080819, 0x08082b192b082b19, 0x08082b2b08080808, 0x08082b2b082b0808,
    0x08082b2b082b2b08, 0x08082b2b2b19192b, 0x08082b2b2b2b0808, 0x0819080808080819, 0x0819080808081908,
    0x081908080808192b, 0x0819080808082b19, 0x0819080808190808, 0x081908080819082b, 0x0819080808191919,
    0x0819080808192b08, 0x08190808082b0819, 0x08190808082b1908, 0x0819080819080808, 0x081908081908082b,
    0x0819080819081919, 0x0819080819082b08, 0x0819080819190819, 0x0819080819191908, 0x08190808192b0808,
    0x08190808192b2b2b, 0x081908082b080819, 0x081908082b081908, 0x081908082b190808, 0x0819081908080808,
    0x081908190808082b, 0x0819081908081919, 0x0819081908082b08, 0x0819081908190819, 0x0819081908191908,
    0x08190819082b0808, 0x0819081919080819, 0x0819081919081908, 0x0819081919190808, 0x081908192b080808,
    0x081908192b191908, 0x081908192b19192b, 0x0819082b08080819, 0x0819082b08081908, 0x0819082b0808192b,
    0x0819082b08190808, 0x0819082b19080808, 0x0819082b192b0808, 0x0819190808080808, 0x081919080808082b,
    0x0819190808081919, 0x0819190808082b08, 0x0819190808190819, 0x0819190808191908, 0x08191908082b0808,
    0x0819190819080819, 0x0819190819081908, 0x0819190819082b19, 0x0819190819190808, 0x08191908192b1908,
    0x081919082b080808, 0x0819191908080819, 0x0819191908081908, 0x0819191908190808, 0x0819191919080808,
    0x0819192b08080808, 0x0819192b08191908, 0x0819192b19082b19, 0x08192b0808080819, 0x08192b0808081908,
    0x08192b0808190808, 0x08192b080819082b, 0x08192b0819080808, 0x08192b0819191908, 0x08192b082b08192b,
    0x08192b1908080808, 0x08192b1908081919, 0x08192b19192b192b, 0x08192b2b19190819, 0x08192b2b2b2b2b19,
    0x082b080808080808, 0x082b08080808082b, 0x082b080808081919, 0x082b080808082b08, 0x082b080808082b2b,
    0x082b080808190819, 0x082b080808191908, 0x082b0808082b0808, 0x082b080819080819, 0x082b080819081908,
    0x082b080819190808, 0x082b08082b080808, 0x082b08082b2b0808, 0x082b081908080819, 0x082b081908081908,
    0x082b081908190808, 0x082b081919080808, 0x082b081919082b08, 0x082b0819192b1919, 0x082b082b08080808,
    0x082b082b082b082b, 0x082b082b2b080808, 0x082b082b2b2b2b08, 0x082b190808080819, 0x082b190808081908,
    0x082b190808190808, 0x082b1908082b2b19, 0x082b190819080808, 0x082b191908080808, 0x082b191919080819,
    0x082b19191919082b, 0x082b19192b192b19, 0x082b192b08080819, 0x082b192b08192b2b, 0x082b192b2b2b192b,
    0x082b2b0808080808, 0x082b2b0808082b08, 0x082b2b0808082b2b, 0x082b2b08082b0808, 0x082b2b0819191919,
    0x082b2b082b082b08, 0x082b2b082b2b082b, 0x082b2b19192b2b08, 0x082b2b192b190808, 0x082b2b2b08082b08,
    0x082b2b2b082b0808, 0x082b2b2b2b08082b, 0x082b2b2b2b082b08, 0x082b2b2b2b082b2b, 0x1908080808080819,
    0x1908080808081908, 0x190808080808192b, 0x1908080808082b19, 0x1908080808190808, 0x190808080819082b,
    0x1908080808191919, 0x1908080808192b08, 0x19080808082b0819, 0x19080808082b1908, 0x1908080819080808,
    0x190808081908082b, 0x1908080819081919, 0x1908080819082b08, 0x1908080819082b2b, 0x1908080819190819,
    0x1908080819191908, 0x19080808192b0808, 0x19080808192b1919, 0x190808082b080819, 0x190808082b081908,
    0x190808082b190808, 0x1908081908080808, 0x190808190808082b, 0x1908081908081919, 0x1908081908082b08,
    0x1908081908190819, 0x1908081908191908, 0x19080819082b0808, 0x1908081919080819, 0x1908081919081908,
    0x1908081919190808, 0x190808192b080808, 0x190808192b081919, 0x190808192b2b082b, 0x1908082b08080819,
    0x1908082b08081908, 0x1908082b08190808, 0x1908082b0819082b, 0x1908082b082b2b19, 0x1908082b19080808,
    0x1908190808080808, 0x190819080808082b, 0x1908190808081919, 0x1908190808082b08, 0x1908190808190819,
    0x1908190808191908, 0x1908190808192b19, 0x19081908082b0808, 0x1908190819080819, 0x1908190819081908,
    0x1908190819190808, 0x190819082b080808, 0x190819082b191908, 0x1908191908080819, 0x1908191908081908,
    0x1908191908190808, 0x19081919082b1908, 0x1908191919080808, 0x190819192b192b2b, 0x1908192b08080808,
    0x1908192b08082b2b, 0x1908192b19081908, 0x1908192b19190808, 0x19082b0808080819, 0x19082b0808081908,
    0x19082b0808190808, 0x19082b0819080808, 0x19082b0819081919, 0x19082b0819191908, 0x19082b08192b082b,
    0x19082b1908080808, 0x19082b1908190819, 0x19082b1919081908, 0x19082b1919190808, 0x19082b19192b2b19,
    0x19082b2b08081908, 0x1919080808080808, 0x191908080808082b, 0x1919080808081919, 0x1919080808082b08,
    0x1919080808190819, 0x1919080808191908, 0x19190808082b0808, 0x19190808082b2b08, 0x1919080819080819,
    0x1919080819081908, 0x1919080819190808, 0x191908082b080808, 0x1919081908080819, 0x1919081908081908,
    0x1919081908190808, 0x1919081908191919, 0x1919081919080808, 0x191908191908082b, 0x1919082b08080808,
    0x1919082b19081908, 0x1919082b2b2b2b2b, 0x1919190808080819, 0x1919190808081908, 0x1919190808190808,
    0x19191908082b0819, 0x1919190819080808, 0x19191908192b0808, 0x191919082b080819, 0x191919082b2b0819,
    0x1919191908080808, 0x1919191908082b08, 0x191919192b080808, 0x191919192b082b08, 0x1919192b082b0819,
    0x1919192b192b2b08, 0x1919192b2b2b0819, 0x19192b0808080808, 0x19192b0808191908, 0x19192b0819080819,
    0x19192b0819190808, 0x19192b082b192b19, 0x19192b1908192b2b, 0x19192b1919080808, 0x19192b191908082b,
    0x19192b2b2b081919, 0x192b080808080819, 0x192b080808081908, 0x192b080808190808, 0x192b080819080808,
    0x192b080819191908, 0x192b0808192b082b, 0x192b08082b08192b, 0x192b08082b2b2b19, 0x192b081908080808,
    0x192b082b082b1908, 0x192b082b19082b2b, 0x192b082b2b19082b, 0x192b190808080808, 0x192b19080819192b,
    0x192b191908190808, 0x192b191919080808, 0x192b191919081919, 0x192b19192b2b1908, 0x192b2b0808080819,
    0x192b2b08192b2b2b, 0x192b2b19082b1919, 0x192b2b2b0808192b, 0x192b2b2b19191908, 0x192b2b2b192b082b,
    0x2b08080808080808, 0x2b0808080808082b, 0x2b08080808081919, 0x2b08080808082b08, 0x2b08080808190819,
    0x2b08080808191908, 0x2b080808082b0808, 0x2b080808082b2b2b, 0x2b08080819080819, 0x2b08080819081908,
    0x2b08080819190808, 0x2b0808082b080808, 0x2b0808082b08082b, 0x2b0808082b2b2b08, 0x2b0808082b2b2b2b,
    0x2b08081908080819, 0x2b08081908081908, 0x2b0808190808192b, 0x2b08081908190808, 0x2b08081919080808,
    0x2b08081919190819, 0x2b08081919192b19, 0x2b08082b08080808, 0x2b08082b082b0808, 0x2b08082b2b080808,
    0x2b08082b2b08082b, 0x2b08082b2b2b0808, 0x2b08082b2b2b2b08, 0x2b08190808080819, 0x2b08190808081908,
    0x2b08190808190808, 0x2b0819080819082b, 0x2b08190808191919, 0x2b08190819080808, 0x2b081908192b0808,
    0x2b0819082b082b19, 0x2b08191908080808, 0x2b08191919081908, 0x2b0819192b2b1919, 0x2b08192b08192b08,
    0x2b08192b192b2b2b, 0x2b082b0808080808, 0x2b082b0808082b08, 0x2b082b08082b1919, 0x2b082b0819192b2b,
    0x2b082b082b080808, 0x2b082b082b08082b, 0x2b082b082b2b2b08, 0x2b082b190808192b, 0x2b082b2b082b082b,
    0x2b082b2b2b080808, 0x2b082b2b2b082b08, 0x2b082b2b2b19192b, 0x2b082b2b2b2b2b08, 0x2b19080808080819,
    0x2b19080808081908, 0x2b19080808190808, 0x2b19080819080808, 0x2b1908081919192b, 0x2b1908082b081908,
    0x2b19081908080808, 0x2b190819082b082b, 0x2b190819192b1908, 0x2b19082b1919192b, 0x2b19082b2b082b19,
    0x2b19190808080808, 0x2b19190808081919, 0x2b19190819081908, 0x2b19190819190808, 0x2b19190819192b08,
    0x2b191919082b2b19, 0x2b1919192b190808, 0x2b1919192b19082b, 0x2b19192b19080819, 0x2b192b0819190819,
    0x2b192b082b2b192b, 0x2b192b1919082b19, 0x2b192b2b08191919, 0x2b192b2b192b0808, 0x2b2b080808080808,
    0x2b2b08080808082b, 0x2b2b080808082b08, 0x2b2b080808082b2b, 0x2b2b0808082b0808, 0x2b2b0808082b2b2b,
    0x2b2b08082b2b0808, 0x2b2b081919190819, 0x2b2b081919192b19, 0x2b2b08192b2b192b, 0x2b2b082b08080808,
    0x2b2b082b0808082b, 0x2b2b082b08082b08, 0x2b2b082b082b2b2b, 0x2b2b082b2b080808, 0x2b2b082b2b2b0808,
    0x2b2b190819080808, 0x2b2b19082b191919, 0x2b2b192b192b1919, 0x2b2b192b2b192b08, 0x2b2b2b0808082b2b,
    0x2b2b2b08082b0808, 0x2b2b2b08082b082b, 0x2b2b2b08082b2b08, 0x2b2b2b082b2b0808, 0x2b2b2b082b2b2b08,
    0x2b2b2b1908081908, 0x2b2b2b192b081908, 0x2b2b2b192b08192b, 0x2b2b2b2b082b2b08, 0x2b2b2b2b082b2b2b,
    0x2b2b2b2b2b190819, 0x2b2b2b2b2b2b2b2b};

constant uint kIq3xxsGrid[256] = {
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414, 0x04041c0c,
    0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14, 0x040c140c, 0x040c142c,
    0x040c1c04, 0x040c1c14, 0x040c240c, 0x040c2c24, 0x040c3e04, 0x04140404, 0x04140414, 0x04140424, 0x04140c0c,
    0x04141404, 0x04141414, 0x04141c0c, 0x04141c1c, 0x04141c3e, 0x04142c0c, 0x04142c3e, 0x04143e2c, 0x041c040c,
    0x041c043e, 0x041c0c04, 0x041c0c14, 0x041c142c, 0x041c3e04, 0x04240c1c, 0x04241c3e, 0x04242424, 0x04242c3e,
    0x04243e1c, 0x04243e2c, 0x042c040c, 0x042c043e, 0x042c1c14, 0x042c2c14, 0x04341c2c, 0x04343424, 0x043e0c04,
    0x043e0c24, 0x043e0c34, 0x043e241c, 0x043e340c, 0x0c04040c, 0x0c04041c, 0x0c040c04, 0x0c040c14, 0x0c04140c,
    0x0c04141c, 0x0c041c04, 0x0c041c14, 0x0c041c24, 0x0c04243e, 0x0c042c04, 0x0c0c0404, 0x0c0c0414, 0x0c0c0c0c,
    0x0c0c1404, 0x0c0c1414, 0x0c14040c, 0x0c14041c, 0x0c140c04, 0x0c140c14, 0x0c14140c, 0x0c141c04, 0x0c143e14,
    0x0c1c0404, 0x0c1c0414, 0x0c1c1404, 0x0c1c1c0c, 0x0c1c2434, 0x0c1c3434, 0x0c24040c, 0x0c24042c, 0x0c242c04,
    0x0c2c1404, 0x0c2c1424, 0x0c2c2434, 0x0c2c3e0c, 0x0c34042c, 0x0c3e1414, 0x0c3e2404, 0x14040404, 0x14040414,
    0x14040c0c, 0x14040c1c, 0x14041404, 0x14041414, 0x14041434, 0x14041c0c, 0x14042414, 0x140c040c, 0x140c041c,
    0x140c042c, 0x140c0c04, 0x140c0c14, 0x140c140c, 0x140c1c04, 0x140c341c, 0x140c343e, 0x140c3e04, 0x14140404,
    0x14140414, 0x14140c0c, 0x14140c3e, 0x14141404, 0x14141414, 0x14141c3e, 0x14142404, 0x14142c2c, 0x141c040c,
    0x141c0c04, 0x141c0c24, 0x141c3e04, 0x141c3e24, 0x14241c2c, 0x14242c1c, 0x142c041c, 0x142c143e, 0x142c240c,
    0x142c3e24, 0x143e040c, 0x143e041c, 0x143e0c34, 0x143e242c, 0x1c04040c, 0x1c040c04, 0x1c040c14, 0x1c04140c,
    0x1c04141c, 0x1c042c04, 0x1c04342c, 0x1c043e14, 0x1c0c0404, 0x1c0c0414, 0x1c0c1404, 0x1c0c1c0c, 0x1c0c2424,
    0x1c0c2434, 0x1c14040c, 0x1c14041c, 0x1c140c04, 0x1c14142c, 0x1c142c14, 0x1c143e14, 0x1c1c0c0c, 0x1c1c1c1c,
    0x1c241c04, 0x1c24243e, 0x1c243e14, 0x1c2c0404, 0x1c2c0434, 0x1c2c1414, 0x1c2c2c2c, 0x1c340c24, 0x1c341c34,
    0x1c34341c, 0x1c3e1c1c, 0x1c3e3404, 0x24040424, 0x24040c3e, 0x24041c2c, 0x24041c3e, 0x24042c1c, 0x24042c3e,
    0x240c3e24, 0x24141404, 0x24141c3e, 0x24142404, 0x24143404, 0x24143434, 0x241c043e, 0x241c242c, 0x24240424,
    0x24242c0c, 0x24243424, 0x242c142c, 0x242c241c, 0x242c3e04, 0x243e042c, 0x243e0c04, 0x243e0c14, 0x243e1c04,
    0x2c040c14, 0x2c04240c, 0x2c043e04, 0x2c0c0404, 0x2c0c0434, 0x2c0c1434, 0x2c0c2c2c, 0x2c140c24, 0x2c141c14,
    0x2c143e14, 0x2c1c0414, 0x2c1c2c1c, 0x2c240c04, 0x2c24141c, 0x2c24143e, 0x2c243e14, 0x2c2c0414, 0x2c2c1c0c,
    0x2c342c04, 0x2c3e1424, 0x2c3e2414, 0x34041424, 0x34042424, 0x34042434, 0x34043424, 0x340c140c, 0x340c340c,
    0x34140c3e, 0x34143424, 0x341c1c04, 0x341c1c34, 0x34242424, 0x342c042c, 0x342c2c14, 0x34341c1c, 0x343e041c,
    0x343e140c, 0x3e04041c, 0x3e04042c, 0x3e04043e, 0x3e040c04, 0x3e041c14, 0x3e042c14, 0x3e0c1434, 0x3e0c2404,
    0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c, 0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c,
    0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04};

constant uchar kIqSigns[128] = {
    0x00, 0x81, 0x82, 0x03, 0x84, 0x05, 0x06, 0x87, 0x88, 0x09, 0x0a, 0x8b, 0x0c, 0x8d, 0x8e, 0x0f, 0x90, 0x11, 0x12,
    0x93, 0x14, 0x95, 0x96, 0x17, 0x18, 0x99, 0x9a, 0x1b, 0x9c, 0x1d, 0x1e, 0x9f, 0xa0, 0x21, 0x22, 0xa3, 0x24, 0xa5,
    0xa6, 0x27, 0x28, 0xa9, 0xaa, 0x2b, 0xac, 0x2d, 0x2e, 0xaf, 0x30, 0xb1, 0xb2, 0x33, 0xb4, 0x35, 0x36, 0xb7, 0xb8,
    0x39, 0x3a, 0xbb, 0x3c, 0xbd, 0xbe, 0x3f, 0xc0, 0x41, 0x42, 0xc3, 0x44, 0xc5, 0xc6, 0x47, 0x48, 0xc9, 0xca, 0x4b,
    0xcc, 0x4d, 0x4e, 0xcf, 0x50, 0xd1, 0xd2, 0x53, 0xd4, 0x55, 0x56, 0xd7, 0xd8, 0x59, 0x5a, 0xdb, 0x5c, 0xdd, 0xde,
    0x5f, 0x60, 0xe1, 0xe2, 0x63, 0xe4, 0x65, 0x66, 0xe7, 0xe8, 0x69, 0x6a, 0xeb, 0x6c, 0xed, 0xee, 0x6f, 0xf0, 0x71,
    0x72, 0xf3, 0x74, 0xf5, 0xf6, 0x77, 0x78, 0xf9, 0xfa, 0x7b, 0xfc, 0x7d, 0x7e, 0xff};

// IQ2_XS: the 16 elements of unit h share the scale nibble h % 2 of scales[h / 2] and are two
// uint16 codes qs[2h], qs[2h + 1]: the low 9 bits index kIq2xsGrid (8 magnitudes), the top 7 are
// signs (kIqSigns). x = d·(0.5 + nibble)·0.25·grid, negated by its sign bit, rounded in that order.
// Layout: d, qs[32] (uint16), scales[8].
struct FmtIQ2_XS {
  enum : uint { kUnit = 16, kBlock = 256, kBlockBytes = 74 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 16) * kBlockBytes;
    const uint h = u % 16;
    const float d = load_half(b);
    const float db = d * (0.5f + float((uint(b[66 + h / 2]) >> (4 * (h % 2))) & 0xFu)) * 0.25f;
    for (uint k = 0; k < 2; ++k) {
      const uint q = load_u16(b + 2 + 2 * (2 * h + k));
      const uint signs = kIqSigns[q >> 9];
      const ulong grid = kIq2xsGrid[q & 511u];
      for (uint j = 0; j < 8; ++j) {
        const float v = db * float(int((grid >> (8 * j)) & 0xFFu));
        w[8 * k + j] = ((signs >> j) & 1u) != 0u ? -v : v;
      }
    }
  }
};

// IQ3_XXS: group g's 32 elements are the 4 magnitudes of kIq3xxsGrid[qs[8g + i]] (i = 0..7); the
// little-endian uint32 at qs[64 + 4g] holds four 7-bit sign fields (one per 8 elements, kIqSigns)
// and the scale in its top 4 bits. x = d·(0.5 + s)·0.5·grid, negated by its sign bit. Layout: d, qs[96].
struct FmtIQ3_XXS {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 98 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint g = u % 8;
    device const uchar* qs = b + 2 + 8 * g;
    device const uchar* a = b + 2 + 64 + 4 * g;
    const uint aux = uint(a[0]) | (uint(a[1]) << 8) | (uint(a[2]) << 16) | (uint(a[3]) << 24);
    const float d = load_half(b);
    const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
    for (uint l = 0; l < 4; ++l) {
      const uint signs = kIqSigns[(aux >> (7 * l)) & 127u];
      for (uint j = 0; j < 8; ++j) {
        const uint grid = kIq3xxsGrid[qs[2 * l + j / 4]];
        const float v = db * float(int((grid >> (8 * (j % 4))) & 0xFFu));
        w[8 * l + j] = ((signs >> j) & 1u) != 0u ? -v : v;
      }
    }
  }
};

// IQ2_XXS: group g's 32 elements are two little-endian uint32 at qs[4g] (byte offset 8g): the first
// one's four bytes index kIq2xxsGrid (8 magnitudes each, one entry per 8 elements); the second holds
// four 7-bit sign fields (kIqSigns) and the scale s in its top 4 bits. x = d·(0.5 + s)·0.25·grid,
// negated by its sign bit, rounded in that order. Layout: d, qs[32] (uint16).
struct FmtIQ2_XXS {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 66 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint g = u % 8;
    device const uchar* qs = b + 2 + 8 * g;
    device const uchar* a = qs + 4;
    const uint aux = uint(a[0]) | (uint(a[1]) << 8) | (uint(a[2]) << 16) | (uint(a[3]) << 24);
    const float d = load_half(b);
    const float db = d * (0.5f + float(aux >> 28)) * 0.25f;
    for (uint l = 0; l < 4; ++l) {
      const uint signs = kIqSigns[(aux >> (7 * l)) & 127u];
      const ulong grid = kIq2xxsGrid[qs[l]];
      for (uint j = 0; j < 8; ++j) {
        const float v = db * float(int((grid >> (8 * j)) & 0xFFu));
        w[8 * l + j] = ((signs >> j) & 1u) != 0u ? -v : v;
      }
    }
  }
};
