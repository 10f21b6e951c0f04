#include "metal/host/tiles.h"

namespace strata::mtl {

GemvTiles drafter_tiles(const std::string& wide_tile) {
  GemvTiles t;
  if (!wide_tile.empty()) t.wide = parse_gemv_tile(wide_tile);
  return t;
}

}  // namespace strata::mtl
