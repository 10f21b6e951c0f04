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
