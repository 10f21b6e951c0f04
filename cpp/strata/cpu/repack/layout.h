#pragma once
// The byte layout of the repacked weight types (quant::GGMLType::Q4_0_R16, Q5_0_R16, Q5_1_R16, Q8_0_R16,
// Q2_K_R16 ... Q6_K_R16, IQ4_XS_R16; the 256-column types at the end of this file). Rows come
// in groups of 16; a group is 16 rows' bytes (16 · row_bytes, so row r of the matrix still starts
// at r · row_bytes when r is a multiple of 16) holding, for each block b of 32 columns, one
// interleaved block of the 16 rows:
//   d[16]       the rows' fp16 scales, one 256-bit load for all 16 rows
//   qs          the quants in steps of 4 columns, each step 16 rows x 4 bytes = one 512-bit load
//               whose 32-bit lane r belongs to row r, so one vpdpbusd against the activation's 4
//               bytes of that step (broadcast) adds 4 products into every row's lane.
// Blocks are stored in pairs, [d of 2p][d of 2p+1][qs of 2p][qs of 2p+1] (an odd last block alone,
// [d][qs]): a pair is 576 (Q4_0), 704 (Q5_0) or 1088 (Q8_0) bytes, a multiple of 64, so in a 64-byte aligned
// group every 64-byte quant load is cache-line aligned (a lone [d][qs] block would put them all
// 32 bytes off, each load split over two lines).
// Q8_0_R16: qs[64·k + 4·r + j] = x[r][4k + j] XOR 0x80 (columns 4k..4k+3, k = 0..7): the int8
//   quant + 128 as an unsigned byte, the operand vpdpbusd multiplies unsigned (the kernel removes
//   128·Σy with the accumulator's start value).
// Q4_0_R16: qs[64·c + 4·r + j] = the plain Q4_0 byte qs[4c + j] of row r (c = 0..3): its low
//   nibble is column 4c + j, its high nibble column 16 + 4c + j, so the low nibbles of chunk c are
//   step c and the high nibbles step c + 4, each a mask (and a shift) away.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "strata/quant/blocks.h"

namespace strata::cpu::repack {

inline constexpr int kRows = 16;
inline constexpr std::size_t kScaleBytes = kRows * sizeof(uint16_t);

// Where block b (of nb) of a group keeps its scales and its quants, as byte offsets in the group.
template <std::size_t QsBytes>
struct Layout {
  static constexpr std::size_t kQsBytes = QsBytes;
  static constexpr std::size_t kBlockBytes = kScaleBytes + QsBytes;
  static bool alone(int64_t b, int64_t nb) { return (b & 1) == 0 && b + 1 == nb; }
  static std::size_t pair(int64_t b) { return static_cast<std::size_t>(b & ~int64_t{1}) * kBlockBytes; }
  static std::size_t d_off(int64_t b, int64_t nb) {
    return pair(b) + (alone(b, nb) ? 0 : kScaleBytes * static_cast<std::size_t>(b & 1));
  }
  static std::size_t qs_off(int64_t b, int64_t nb) {
    return pair(b) + (alone(b, nb) ? kScaleBytes : 2 * kScaleBytes + QsBytes * static_cast<std::size_t>(b & 1));
  }
};
using Q4Layout = Layout<kRows * quant::kQK32 / 2>;  // 256 quant bytes per block
using Q8Layout = Layout<kRows * quant::kQK32>;      // 512
// Q5_0_R16: Q4_0_R16's d and qs (qs[64·c + 4·r + j] = the plain Q5_0 byte qs[4c + j] of row r), then at
//   qs + kQ5MaskOff (within the block's quant bytes) the fifth bits as eight 64-bit masks, one per 4-column step: bit
//   4·r + j of mask s (byte 8·s + (4·r + j) / 8, bit (4·r + j) % 8) is bit 4s + j of row r's plain qh — the fifth bit
//   of the column that byte j of lane r holds in step s (columns 4s + j for s < 4, 16 + 4(s − 4) + j for s >= 4, bits
//   4s + j of qh either way). A step's fifth bits are then one mask-register load and one masked byte add of 16 away
//   (AVX-512 BW), at the plain format's 22 bytes per row and block.
inline constexpr std::size_t kQ5MaskOff = Q4Layout::kQsBytes;
using Q5Layout = Layout<kQ5MaskOff + 8 * sizeof(uint64_t)>;  // 256 quant bytes + 64 mask bytes
// The fifth bit of byte j of lane r in step s, in / into a block's masks hm (at qs + kQ5MaskOff).
inline int q5_fifth_bit(const uint8_t* hm, int s, int r, int j) {
  const int bit = 4 * r + j;
  return (hm[8 * s + bit / 8] >> (bit % 8)) & 1;
}
inline void q5_set_fifth_bit(uint8_t* hm, int s, int r, int j, unsigned v) {
  const int bit = 4 * r + j;
  hm[8 * s + bit / 8] = static_cast<uint8_t>(hm[8 * s + bit / 8] | ((v & 1u) << (bit % 8)));
}
// Q5_1_R16: Q5_0_R16's d, nibble steps and fifth-bit masks, then at qs + kQ51MinOff the 16 rows' fp16 mins m
//   (x = d·q + m): 24 bytes per row and block, as the plain format; a block pair is 768 bytes (12 lines).
inline constexpr std::size_t kQ51MinOff = kQ5MaskOff + 8 * sizeof(uint64_t);
using Q51Layout = Layout<kQ51MinOff + kScaleBytes>;
static_assert(Q51Layout::kBlockBytes == kRows * sizeof(quant::BlockQ5_1) && 2 * Q51Layout::kBlockBytes % 64 == 0);
static_assert(Q4Layout::kBlockBytes == kRows * sizeof(quant::BlockQ4_0));
static_assert(Q5Layout::kBlockBytes == kRows * sizeof(quant::BlockQ5_0));
static_assert(Q8Layout::kBlockBytes == kRows * sizeof(quant::BlockQ8_0));
static_assert(2 * Q4Layout::kBlockBytes % 64 == 0 && 2 * Q8Layout::kBlockBytes % 64 == 0 &&
              2 * Q5Layout::kBlockBytes % 64 == 0);

// Q4_K_R16: per super-block b (256 columns) of a group, 16 · 144 = 2304 bytes (a multiple of 64, so
// every block of a 64-byte aligned group is too), at b · 2304:
//   [0, 32)      d[16]     the rows' fp16 super-block scales
//   [32, 64)     dmin[16]  the rows' fp16 min scales
//   [64, 160)    the 8 sub-block scales of the 16 rows, 6 bits each, unpacked (unpack6) to 128
//                bytes U with U[16·g + r] = scale g of row r: 16 bytes per sub-block, one
//                zero-extension to 16 int32 lanes
//   [160, 256)   the 8 mins likewise, U[32·k + 2·r + e] = min 2k + e of row r: 32 bytes per pair
//                of sub-blocks, zero-extended to int16 they are the 16 lanes' (min 2k, min 2k + 1)
//                pairs that one vpmaddwd / vpdpwssd multiplies with the activation's pair sums
//   [256, 2304)  qs[64·c + 4·r + j] = the plain Q4_K byte qs[4c + j] of row r (c = 0..31): chunk
//                c's low nibbles are columns 64·(c/8) + 4·(c%8) + j (sub-block 2·(c/8)), its high
//                nibbles the same + 32 (sub-block 2·(c/8) + 1), each one vpdpbusd step.
// The 6-bit packing of 128 values U into 96 bytes: lo[i] = U[i] & 15 | (U[64 + i] & 15) << 4
// (i < 64); hi[i] (i < 32) holds U[32·q + i] >> 4 in bits 2q, 2q + 1 (q = 0..3). Broadcast to 64
// bytes, hi shifted right by 0 / 2 (4 / 6) in its two halves gives the top bits of U[0..64)
// (U[64..128)): one 512-bit pass per 64 values.
struct Q4KLayout {
  static constexpr std::size_t kBlockBytes = kRows * sizeof(quant::BlockQ4_K);
  static constexpr std::size_t kD = 0, kDmin = 32, kScales = 64, kMins = 160, kQs = 256;
  static std::size_t block(int64_t b) { return static_cast<std::size_t>(b) * kBlockBytes; }
};
static_assert(Q4KLayout::kBlockBytes == 2304 && Q4KLayout::kBlockBytes % 64 == 0);
static_assert(Q4KLayout::kQs + kRows * quant::kQK_K / 2 == Q4KLayout::kBlockBytes);

// Q5_K_R16: Q4_K_R16 with the 16 rows' fifth bits, per super-block 16 · 176 = 2816 bytes (44 cache
// lines) at b · 2816:
//   [0, 256)     d, dmin, scales, mins as Q4_K_R16
//   [256, 768)   qh[64·s + 4·r + j] = the plain Q5_K byte qh[4s + j] of row r (s = 0..7): byte l of qh
//                holds bit 2k (low nibble) and 2k + 1 (high nibble) of column l of each 32-byte qs
//                chunk k, so step s of every sub-block pair reads the same 64 bytes, one shift away
//   [768, 2816)  qs as Q4_K_R16's: chunk c = 8k + s is sub-block pair k's step s
struct Q5KLayout {
  static constexpr std::size_t kBlockBytes = kRows * sizeof(quant::BlockQ5_K);
  static constexpr std::size_t kD = 0, kDmin = 32, kScales = 64, kMins = 160, kQh = 256, kQs = 768;
  static std::size_t block(int64_t b) { return static_cast<std::size_t>(b) * kBlockBytes; }
};
static_assert(Q5KLayout::kBlockBytes == 2816 && Q5KLayout::kBlockBytes % 64 == 0);
static_assert(Q5KLayout::kQs + kRows * quant::kQK_K / 2 == Q5KLayout::kBlockBytes);

inline void pack6(const uint8_t* u, uint8_t* out) {
  for (int i = 0; i < 64; ++i) out[i] = static_cast<uint8_t>((u[i] & 15) | ((u[64 + i] & 15) << 4));
  for (int i = 0; i < 32; ++i) {
    int h = 0;
    for (int q = 0; q < 4; ++q) h |= ((u[32 * q + i] >> 4) & 3) << (2 * q);
    out[64 + i] = static_cast<uint8_t>(h);
  }
}
inline void unpack6(const uint8_t* in, uint8_t* u) {
  for (int i = 0; i < 128; ++i) {
    const int lo = (in[i % 64] >> (4 * (i / 64))) & 15;
    const int hi = (in[64 + i % 32] >> (2 * (i / 32))) & 3;
    u[i] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Super-blocks stored in pairs, each block's quants (Qs bytes) and meta (Meta bytes) apart:
// [meta 2p][meta 2p + 1][quants 2p][quants 2p + 1], an odd last block alone as [quants][meta]. The kernel
// reads a block's meta first and then its quants front to back, so the quants stay one stream and start
// at a cache-line boundary when the two metas fill whole lines (Q6_K_R16, Q3_K_R16).
template <std::size_t Qs, std::size_t Meta>
struct PairedBlocks {
  static constexpr std::size_t kQsBytes = Qs;
  static constexpr std::size_t kMetaBytes = Meta;
  static constexpr std::size_t kBlockBytes = Qs + Meta;
  static bool alone(int64_t b, int64_t nb) { return (b & 1) == 0 && b + 1 == nb; }
  static std::size_t pair(int64_t b) { return static_cast<std::size_t>(b & ~int64_t{1}) * kBlockBytes; }
  static std::size_t meta_off(int64_t b, int64_t nb) {
    return pair(b) + (alone(b, nb) ? kQsBytes : kMetaBytes * static_cast<std::size_t>(b & 1));
  }
  static std::size_t qs_off(int64_t b, int64_t nb) {
    return pair(b) + (alone(b, nb) ? 0 : 2 * kMetaBytes + kQsBytes * static_cast<std::size_t>(b & 1));
  }
};

// Q6_K_R16: per super-block of a group 16 · 210 = 3360 bytes: the quants (3072) and the meta (288).
//   quants: 48 chunks of 64 bytes in the order the kernel reads them, three per (half h, step s)
//           (h = 0..1, s = 0..7): chunk 3·(8h + s) + m holds, at 4·r + j, row r's plain byte
//           m = 0: ql[64h + 4s + j], m = 1: ql[64h + 32 + 4s + j], m = 2: qh[32h + 4s + j].
//           Together they make the 6-bit quants of columns 128h + 32·p + 4s + j, p = 0..3 (ggml's
//           order: the low nibble of m = 0 with qh bits 0-1, of m = 1 with bits 2-3, their high
//           nibbles with bits 4-5 and 6-7), one vpdpbusd step each.
//   meta:   d[16] fp16, then the 16 int8 sub-block scales of the 16 rows with sc[32·k + 2·r + e] =
//           scale 2k + e of row r: sign-extended to int16, lane r holds (scale 2k, scale 2k + 1),
//           the pair vpdpwssd multiplies with the activation's (bsum 2k, bsum 2k + 1).
// PairedBlocks (576 + 6144 bytes a pair = 105 cache lines; quants ql 2048 + qh 1024); a block is read
// front to back (three interleaved streams read 3-4x slower from memory: docs/benchmarks.md).
struct Q6KLayout : PairedBlocks<3 * kRows * quant::kQK_K / 4, kRows * (2 + quant::kQK_K / 16)> {
  static constexpr std::size_t kScales = 32;  // within the meta
  // The chunk holding plain ql[4c .. 4c + 4) (c < 32) / qh[4c .. 4c + 4) (c < 16) of every row.
  static int ql_chunk(int c) { return 3 * (8 * (c / 16) + c % 8) + (c % 16) / 8; }
  static int qh_chunk(int c) { return 3 * c + 2; }
};
static_assert(Q6KLayout::kBlockBytes == kRows * sizeof(quant::BlockQ6_K));
static_assert(Q6KLayout::kQsBytes % 64 == 0 && 2 * Q6KLayout::kMetaBytes % 64 == 0);

// IQ4_XS_R16: per super-block b (256 columns) of a group, 16 · 136 = 2176 bytes (a multiple of 64) at
// b · 2176:
//   [0, 32)      d[16]  the rows' fp16 super-block scales
//   [32, 128)    the 8 sub-block scales of the 16 rows as their unsigned 6-bit codes ls (the scale is
//                ls − 32), packed by pack6 from U[16·g + r] = ls of sub-block g of row r: one
//                512-bit pass unpacks all 128 and 16 bytes per sub-block become one row per lane.
//                (The 6-bit packing keeps the row's 136 bytes: int8 scales would need 160.)
//   [128, 2176)  qs[64·c + 4·r + j] = the plain IQ4_XS byte qs[4c + j] of row r (c = 0..31): chunk c
//                belongs to sub-block g = c / 4; its low nibbles index the codebook entries of
//                columns 32·g + 4·(c % 4) + j, its high nibbles those of the same + 16, one vpdpbusd
//                step each.
struct IQ4XSLayout {
  static constexpr std::size_t kBlockBytes = kRows * sizeof(quant::BlockIQ4_XS);
  static constexpr std::size_t kD = 0, kScales = 32, kQs = 128;
  static std::size_t block(int64_t b) { return static_cast<std::size_t>(b) * kBlockBytes; }
};
static_assert(IQ4XSLayout::kBlockBytes == 2176 && IQ4XSLayout::kBlockBytes % 64 == 0);
static_assert(IQ4XSLayout::kQs + kRows * quant::kQK_K / 2 == IQ4XSLayout::kBlockBytes);

// Q3_K_R16: per super-block of a group 16 · 110 = 1760 bytes, PairedBlocks (448 + 3072 bytes a pair =
// 55 cache lines): the quants (1536) and the meta (224).
//   quants: 24 chunks of 64 bytes in the order the kernel reads them: for t = 0..7 the hmask chunk 2t and
//           the half-0 qs chunk 2t + 1, then the half-1 qs chunks 16 + t. At 4·r + j, row r's plain byte
//           hmask[4t + j] / qs[32h + 4t + j]: the 2-bit fields s = 0..3 of a qs byte are the low bits of
//           columns 128h + 32s + 4t + j, bit 4h + s of the hmask byte their high bit, one vpdpbusd step
//           per (h, s, t).
//   meta:   d[16] fp16, then the 16 rows' 16 sub-block scales as their unsigned 6-bit codes (scale + 32),
//           U[16·j + r] = scale j of row r, packed by pack6 in two halves of 128 (at 32 and 128):
//           16 bytes per sub-block become one row per lane, and the row keeps its 110 bytes.
struct Q3KLayout : PairedBlocks<kRows*(quant::kQK_K / 4 + quant::kQK_K / 8), kRows * (2 + 12)> {
  static constexpr std::size_t kScales = 32;  // within the meta
  static int hm_chunk(int t) { return 2 * t; }
  static int qs_chunk(int h, int t) { return h == 0 ? 2 * t + 1 : 16 + t; }
};
static_assert(Q3KLayout::kBlockBytes == kRows * sizeof(quant::BlockQ3_K));
static_assert(Q3KLayout::kQsBytes % 64 == 0 && 2 * Q3KLayout::kMetaBytes % 64 == 0);

// Q2_K_R16: per super-block b (256 columns) of a group, 16 · 84 = 1344 bytes (21 cache lines) at b · 1344:
//   [0, 32)       d[16]     the rows' fp16 super-block scales
//   [32, 64)      dmin[16]  the rows' fp16 super-block mins
//   [64, 320)     sc[32·k + 2·r + e] = the plain scales byte 2k + e of row r (scale in the low nibble, min in
//                 the high one): zero-extended to int16, lane r holds the pair (2k, 2k + 1) of row r, which
//                 vpdpwssd meets with the activation's (bsum 2k, bsum 2k + 1) once the mins are shifted down
//   [320, 1344)   qs[64·(8h + t) + 4·r + j] = the plain qs byte 32h + 4t + j of row r: its 2-bit field s holds
//                 column 128h + 32s + 4t + j, one vpdpbusd step per (h, s, t)
struct Q2KLayout {
  static constexpr std::size_t kBlockBytes = kRows * sizeof(quant::BlockQ2_K);
  static constexpr std::size_t kD = 0, kDmin = 32, kScales = 64, kQs = 320;
  static std::size_t block(int64_t b) { return static_cast<std::size_t>(b) * kBlockBytes; }
};
static_assert(Q2KLayout::kBlockBytes == 1344 && Q2KLayout::kBlockBytes % 64 == 0);
static_assert(Q2KLayout::kQs + kRows * quant::kQK_K / 4 == Q2KLayout::kBlockBytes);

}  // namespace strata::cpu::repack
