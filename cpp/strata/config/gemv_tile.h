#pragma once
// The Metal GEMV tile shape as a setting (Config.metal_mtp_tile, STRATA_METAL_MTP_TILE): L lanes per
// weight row, R rows per lane group, S SIMD groups per threadgroup, K activation rows per pass
// (metal/kernels/gemv.h, metal/host/tiles.h). Kept in the core so the one settings parser
// (config/settings.cpp) validates the variable with the same rule the Metal backend applies.
#include <cstdint>
#include <string>

namespace strata::config {

struct GemvTile {
  uint32_t L = 32, R = 1, S = 4, K = 4;
  bool operator==(const GemvTile& o) const { return L == o.L && R == o.R && S == o.S && K == o.K; }
};

// Supported: L ∈ {8, 16, 32}, R ∈ {1, 2, 4}, S ∈ {1, 2, 4, 8}, K ∈ {1, 2, 4, 8}, R·K <= 16.
bool tile_supported(const GemvTile& t);
std::string tile_string(const GemvTile& t);
// "L,R,S,K" (whitespace allowed) -> a supported tile; strata::Error(Config) naming what is wrong.
GemvTile parse_gemv_tile(const std::string& text);

}  // namespace strata::config
