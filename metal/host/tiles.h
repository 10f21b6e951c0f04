#pragma once
// GEMV tile shapes (metal/kernels/gemv.h): L lanes per weight row, R rows per lane group, S SIMD
// groups per threadgroup, K activation rows per pass. A matrix's class (narrow / wide) depends on its
// shape only, never on how many activation rows a call has, so the lane split L — the only part of
// the tile that changes the bits of a result — is the same for a single-row and a batched GEMV of
// that matrix.
#include <cstdint>
#include <string>

#include "strata/config/gemv_tile.h"

namespace strata::mtl {

// The tile and its rule live in the core (config/gemv_tile.h), where the settings parser checks
// STRATA_METAL_MTP_TILE with them.
using config::GemvTile;
using config::parse_gemv_tile;
using config::tile_string;
using config::tile_supported;

inline constexpr int64_t kWideRows = 4096;  // rows at or above this are the wide class

struct GemvTiles {
  GemvTile narrow{32, 1, 2, 4};
  GemvTile wide{16, 2, 4, 4};
  const GemvTile& pick(int64_t rows) const { return rows >= kWideRows ? wide : narrow; }
  bool operator==(const GemvTiles& o) const { return narrow == o.narrow && wide == o.wide; }
};

// The drafter's tiles: defaults, with the wide class replaced by `wide_tile` ("L,R,S,K") when it is
// not empty (Config.metal_mtp_tile, STRATA_METAL_MTP_TILE; a malformed value is a Config error).
GemvTiles drafter_tiles(const std::string& wide_tile);

}  // namespace strata::mtl
