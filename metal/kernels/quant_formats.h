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
//   IQ3_S     32  110 / 256        IQ2_S      16  82 / 256       IQ1_S  32  50 / 256
//   IQ1_M     16   56 / 256
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

// The IQ2_XXS / IQ2_XS / IQ2_S / IQ3_XXS / IQ3_S codebooks and the IQ sign table (ggml's iq2xxs_grid,
// iq2xs_grid, iq2s_grid, iq3xxs_grid, iq3s_grid, ksigns_iq2xs): the CPU's own entries
// (cpp/strata/quant/iq_tables/, also included by iq_grids.cpp; the Metal compiler and the emulator
// see the repository root); tests/cpp/test_metal_gemv.cpp checks the arrays are equal.
constant ulong kIq2xxsGrid[256] = {
#include "cpp/strata/quant/iq_tables/iq2xxs_grid.inc"
};

constant ulong kIq2xsGrid[512] = {
#include "cpp/strata/quant/iq_tables/iq2xs_grid.inc"
};

constant uint kIq3xxsGrid[256] = {
#include "cpp/strata/quant/iq_tables/iq3xxs_grid.inc"
};

constant ulong kIq2sGrid[1024] = {
#include "cpp/strata/quant/iq_tables/iq2s_grid.inc"
};

constant uint kIq3sGrid[512] = {
#include "cpp/strata/quant/iq_tables/iq3s_grid.inc"
};

constant uchar kIqSigns[128] = {
#include "cpp/strata/quant/iq_tables/ksigns_iq2xs.inc"
};

// The IQ1_S / IQ1_M codebook (ggml's iq1s_grid): 8 signed bytes (-1, 0, +1) per entry, element j in
// byte j; the CPU's entries too (cpp/strata/quant/iq_tables/iq1s_grid.inc, included by iq1s_grid.cpp).
constant ulong kIq1sGrid[2048] = {
#include "cpp/strata/quant/iq_tables/iq1s_grid.inc"
};

// One run of 8 elements of the IQ2 / IQ3 formats: db · magnitude j (byte j of the run's grid bytes),
// negated where bit j of signs is set (the CPU's decode_run, quant/dequantize_iq2_iq3.cpp).
inline void iq_run(float db, ulong grid, uint signs, thread float* w) {
  for (uint j = 0; j < 8; ++j) {
    const float v = db * float(int((grid >> (8 * j)) & 0xFFu));
    w[j] = ((signs >> j) & 1u) != 0u ? -v : v;
  }
}

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
      iq_run(db, kIq2xsGrid[q & 511u], signs, w + 8 * k);
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
      iq_run(db, ulong(kIq3xxsGrid[qs[2 * l]]) | (ulong(kIq3xxsGrid[qs[2 * l + 1]]) << 32), signs, w + 8 * l);
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
      iq_run(db, kIq2xxsGrid[qs[l]], signs, w + 8 * l);
    }
  }
};

// IQ3_S: group g's 32 elements are four runs of 8 (l = 0..3), each the 4 magnitudes of two grid
// entries k = 8g + 2l, k + 1: a 9-bit index into kIq3sGrid, qs[k] plus bit k % 8 of qh[k / 8]; bit j
// of signs[4g + l] negates element j of run l (8 free bits). The group scale s is nibble g % 2 of
// scales[g / 2]. x = d·(1 + 2s)·grid, negated by its sign bit. Layout: d, qs[64], qh[8], signs[32],
// scales[4].
struct FmtIQ3_S {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 110 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint g = u % 8;
    device const uchar* qs = b + 2;
    device const uchar* qh = b + 66;
    device const uchar* signs = b + 74 + 4 * g;
    const float d = load_half(b);
    const float db = d * float(int(2u * ((uint(b[106 + g / 2]) >> (4 * (g % 2))) & 0xFu) + 1u));
    for (uint l = 0; l < 4; ++l) {
      const uint k = 8 * g + 2 * l;  // the run's two entries k, k + 1 share qh[k / 8]
      const uint hi = uint(qh[k / 8]) >> (k % 8);
      const ulong lo4 = kIq3sGrid[uint(qs[k]) | ((hi & 1u) << 8)];
      const ulong hi4 = kIq3sGrid[uint(qs[k + 1]) | (((hi >> 1) & 1u) << 8)];
      iq_run(db, lo4 | (hi4 << 32), uint(signs[l]), w + 8 * l);
    }
  }
};

// IQ2_S: the 16 elements of unit h share the scale nibble h % 2 of scales[h / 2] and are two runs of 8
// (k = 2h, 2h + 1): the 8 magnitudes of kIq2sGrid at the 10-bit index qs[k] plus bits 2 (k % 4),
// 2 (k % 4) + 1 of qh[k / 4] as its top two; bit j of signs[k] negates element j (8 free bits).
// x = d·(0.5 + nibble)·0.25·grid, negated by its sign bit, rounded in that order. Layout: d, qs[32],
// signs[32], qh[8], scales[8].
struct FmtIQ2_S {
  enum : uint { kUnit = 16, kBlock = 256, kBlockBytes = 82 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 16) * kBlockBytes;
    const uint h = u % 16;
    const float d = load_half(b);
    const float db = d * (0.5f + float((uint(b[74 + h / 2]) >> (4 * (h % 2))) & 0xFu)) * 0.25f;
    for (uint r = 0; r < 2; ++r) {
      const uint k = 2 * h + r;
      const uint q = uint(b[2 + k]) | (((uint(b[66 + k / 4]) >> (2 * (k % 4))) & 3u) << 8);
      const uint signs = b[34 + k];
      iq_run(db, kIq2sGrid[q], signs, w + 8 * r);
    }
  }
};

// One run of 8 elements of IQ1_S / IQ1_M: dl · (value j of the grid entry + delta), the value the
// signed byte j of grid (the CPU's decode_run, quant/dequantize_iq1.cpp; two roundings, no contraction).
inline void iq1_run(float dl, float delta, ulong grid, thread float* w) {
  for (uint j = 0; j < 8; ++j) w[j] = dl * (float(int(int8_t(uchar((grid >> (8 * j)) & 0xFFu)))) + delta);
}

// IQ1_S: group g's 32 elements share the uint16 qh[g]: its bits 12..14 are the scale s, bit 15 the
// delta sign (set: -1/8, else +1/8); run l (0..3) is the entry of kIq1sGrid at the 11-bit index
// qs[4g + l] plus bits 3l .. 3l + 2 of qh[g] as its top three. x = d·(2s + 1)·(grid + delta), rounded
// in that order. Layout: d, qs[32], qh[8] (uint16).
struct FmtIQ1_S {
  enum : uint { kUnit = 32, kBlock = 256, kBlockBytes = 50 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 8) * kBlockBytes;
    const uint g = u % 8;
    const uint qh = load_u16(b + 34 + 2 * g);
    const float d = load_half(b);
    const float dl = d * float(int(2u * ((qh >> 12) & 7u) + 1u));
    const float delta = (qh & 0x8000u) != 0u ? -0.125f : 0.125f;
    for (uint l = 0; l < 4; ++l) {
      const uint q = uint(b[2 + 4 * g + l]) | (((qh >> (3 * l)) & 7u) << 8);
      iq1_run(dl, delta, kIq1sGrid[q], w + 8 * l);
    }
  }
};

// IQ1_M: the 16 elements of unit h share the 3-bit scale s at bits 3 (h % 4) .. 3 (h % 4) + 2 of the
// uint16 scales[h / 4] and are two runs of 8 (k = 2h, 2h + 1, nibble k % 2 of qh[h]): the entry of
// kIq1sGrid at the 11-bit index qs[k] plus the nibble's low 3 bits as its top three, the nibble's bit 3
// the run's delta sign (set: -1/8). The fp16 d is the top nibbles of the four scale words, scales[0]'s
// the lowest. x = d·(2s + 1)·(grid + delta), rounded in that order. Layout: qs[32], qh[16], scales[4].
struct FmtIQ1_M {
  enum : uint { kUnit = 16, kBlock = 256, kBlockBytes = 56 };
  static inline void decode(device const uchar* row, uint u, uint, thread float* w) {
    device const uchar* b = row + (u / 16) * kBlockBytes;
    const uint h = u % 16;
    const uint s[4] = {load_u16(b + 48), load_u16(b + 50), load_u16(b + 52), load_u16(b + 54)};
    const uint d_bits = (s[0] >> 12) | ((s[1] >> 8) & 0x00F0u) | ((s[2] >> 4) & 0x0F00u) | (s[3] & 0xF000u);
    const float d = half_bits_to_float(ushort(d_bits));
    const float dl = d * float(int(2u * ((s[h / 4] >> (3 * (h % 4))) & 7u) + 1u));
    for (uint r = 0; r < 2; ++r) {
      const uint k = 2 * h + r;
      const uint nib = uint(b[32 + h]) >> (4 * r);
      const float delta = (nib & 8u) != 0u ? -0.125f : 0.125f;
      iq1_run(dl, delta, kIq1sGrid[uint(b[k]) | ((nib & 7u) << 8)], w + 8 * r);
    }
  }
};
