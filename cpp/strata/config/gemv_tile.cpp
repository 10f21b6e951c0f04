#include "strata/config/gemv_tile.h"

#include <cctype>

#include "strata/util/error.h"

namespace strata::config {

bool tile_supported(const GemvTile& t) {
  const bool l = t.L == 8 || t.L == 16 || t.L == 32;
  const bool r = t.R == 1 || t.R == 2 || t.R == 4;
  const bool s = t.S == 1 || t.S == 2 || t.S == 4 || t.S == 8;
  const bool k = t.K == 1 || t.K == 2 || t.K == 4 || t.K == 8;
  return l && r && s && k && t.R * t.K <= 16;
}

std::string tile_string(const GemvTile& t) {
  return std::to_string(t.L) + "," + std::to_string(t.R) + "," + std::to_string(t.S) + "," + std::to_string(t.K);
}

GemvTile parse_gemv_tile(const std::string& text) {
  uint32_t v[4] = {};
  int n = 0;
  size_t i = 0;
  auto fail = [&](const std::string& why) -> GemvTile {
    throw_error(ErrorKind::Config, "STRATA_METAL_MTP_TILE = \"" + text + "\": " + why +
                                       " (expected L,R,S,K with L in {8,16,32}, R in {1,2,4}, S in {1,2,4,8}, "
                                       "K in {1,2,4,8}, R*K <= 16)");
  };
  while (true) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return fail("expected a number");
    uint64_t x = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      x = x * 10 + static_cast<uint64_t>(text[i] - '0');
      if (x > 1024) return fail("number out of range");
      ++i;
    }
    if (n == 4) return fail("more than four numbers");
    v[n++] = static_cast<uint32_t>(x);
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i == text.size()) break;
    if (text[i] != ',') return fail("unexpected character");
    ++i;
  }
  if (n != 4) return fail("expected four numbers");
  const GemvTile t{v[0], v[1], v[2], v[3]};
  if (!tile_supported(t)) return fail("unsupported combination " + tile_string(t));
  return t;
}

}  // namespace strata::config
