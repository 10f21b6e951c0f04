#pragma once
// The byte layout of the repacked weight types (quant::GGMLType::Q4_0_R16, Q8_0_R16). Rows come
// in groups of 16; a group is 16 rows' bytes (16 · row_bytes, so row r of the matrix still starts
// at r · row_bytes when r is a multiple of 16) holding, for each block b of 32 columns, one
// interleaved block of the 16 rows:
//   d[16]       the rows' fp16 scales, one 256-bit load for all 16 rows
//   qs          the quants in steps of 4 columns, each step 16 rows x 4 bytes = one 512-bit load
//               whose 32-bit lane r belongs to row r, so one vpdpbusd against the activation's 4
//               bytes of that step (broadcast) adds 4 products into every row's lane.
// Q8_0_R16: qs[64·k + 4·r + j] = x[r][4k + j] XOR 0x80 (columns 4k..4k+3, k = 0..7): the int8
//   quant + 128 as an unsigned byte, the operand vpdpbusd multiplies unsigned (the kernel removes
//   128·Σy with the accumulator's start value).
// Q4_0_R16: qs[64·c + 4·r + j] = the plain Q4_0 byte qs[4c + j] of row r (c = 0..3): its low
//   nibble is column 4c + j, its high nibble column 16 + 4c + j, so the low nibbles of chunk c are
//   step c and the high nibbles step c + 4, each a mask (and a shift) away.
#include <cstdint>

#include "strata/quant/blocks.h"

namespace strata::cpu::repack {

inline constexpr int kRows = 16;

struct BlockQ4_0x16 {
  uint16_t d[kRows];
  uint8_t qs[kRows * quant::kQK32 / 2];
};
struct BlockQ8_0x16 {
  uint16_t d[kRows];
  uint8_t qs[kRows * quant::kQK32];
};
static_assert(sizeof(BlockQ4_0x16) == kRows * sizeof(quant::BlockQ4_0));
static_assert(sizeof(BlockQ8_0x16) == kRows * sizeof(quant::BlockQ8_0));

}  // namespace strata::cpu::repack
