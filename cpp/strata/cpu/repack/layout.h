#pragma once
// The byte layout of the repacked weight types (quant::GGMLType::Q4_0_R16, Q8_0_R16). Rows come
// in groups of 16; a group is 16 rows' bytes (16 · row_bytes, so row r of the matrix still starts
// at r · row_bytes when r is a multiple of 16) holding, for each block b of 32 columns, one
// interleaved block of the 16 rows:
//   d[16]       the rows' fp16 scales, one 256-bit load for all 16 rows
//   qs          the quants in steps of 4 columns, each step 16 rows x 4 bytes = one 512-bit load
//               whose 32-bit lane r belongs to row r, so one vpdpbusd against the activation's 4
//               bytes of that step (broadcast) adds 4 products into every row's lane.
// Blocks are stored in pairs, [d of 2p][d of 2p+1][qs of 2p][qs of 2p+1] (an odd last block alone,
// [d][qs]): a pair is 576 (Q4_0) or 1088 (Q8_0) bytes, a multiple of 64, so in a 64-byte aligned
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
static_assert(Q4Layout::kBlockBytes == kRows * sizeof(quant::BlockQ4_0));
static_assert(Q8Layout::kBlockBytes == kRows * sizeof(quant::BlockQ8_0));
static_assert(2 * Q4Layout::kBlockBytes % 64 == 0 && 2 * Q8Layout::kBlockBytes % 64 == 0);

}  // namespace strata::cpu::repack
