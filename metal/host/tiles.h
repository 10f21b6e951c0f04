#pragma once
// GEMV tile shapes (metal/kernels/gemv.h): L lanes per weight row, R rows per lane group, S SIMD
// groups per threadgroup, K activation rows per pass. A matrix's class (narrow / wide) depends on its
// shape only, never on how many activation rows a call has, so the lane split L — the only part of
// the tile that changes the bits of a result — is the same for a single-row and a batched GEMV of
// that matrix.
#include <cstdint>
#include <string>

namespace strata::mtl {

struct GemvTile {
  uint32_t L = 32, R = 1, S = 4, K = 4;
  bool operator==(const GemvTile& o) const { return L == o.L && R == o.R && S == o.S && K == o.K; }
};

// Supported: L ∈ {8, 16, 32}, R ∈ {1, 2, 4}, S ∈ {1, 2, 4, 8}, K ∈ {1, 2, 4, 8}, R·K <= 16.
bool tile_supported(const GemvTile& t);
std::string tile_string(const GemvTile& t);
// "L,R,S,K" (whitespace allowed) -> a supported tile; strata::Error(Config) naming what is wrong.
GemvTile parse_gemv_tile(const std::string& text);

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
