#pragma once
// The AMX instructions that touch memory, written so that the compiler sees what they read. GCC's
// intrinsics do not say it (GCC 12, <amxtileintrin.h>): _tile_loadconfig declares 8 of its 64
// bytes as read, and _tile_loadd declares no memory at all. So the stores that fill a tile
// configuration, or a buffer a tile is then loaded from (Q4_0's unpacked nibbles, the packed
// activations), are dead stores to the compiler: it may drop them or move them past the load. It
// did drop the configuration's (every tile configured with zero rows; SIGILL on the lent Xeon, 2026-12).
// Here LDTILECFG takes the whole 64 bytes as an operand and TILELOADD clobbers memory. TILESTORED,
// TILEZERO, TDPB* and TILERELEASE come from the intrinsics (the store already clobbers memory).
#include <immintrin.h>

#include <cstdint>

namespace strata::cpu::amx {

// The 64-byte operand of LDTILECFG (palette 1): bytes per row and rows of each of the 16 tile
// registers; registers left at zero are unused.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

inline void load_tile_config(const TileConfig& c) { asm volatile("ldtilecfg %0" : : "m"(c)); }

}  // namespace strata::cpu::amx

// Tile register T (a literal 0..7: the register number is part of the instruction) from rows at
// base, stride bytes apart; every store before it is done first.
#define STRATA_TILE_LOADD(T, base, stride)                                           \
  asm volatile("tileloadd (%0,%1,1), %%tmm" #T                                       \
               :                                                                     \
               : "r"(static_cast<const void*>(base)), "r"(static_cast<long>(stride)) \
               : "memory")
