#pragma once
// A record of what the router saw and chose in every layer of the last window: probabilities,
// the residency map, MOCE parameters, draft rows and the selected ids. Off by default; tests turn
// it on to check the engine's selection against routing::route_row called directly. Recording
// allocates (vectors grow to the window), so it is a test facility, not for the decode loop.
#include <cstdint>
#include <vector>

#include "strata/routing/router.h"

namespace strata::experts {

class RouteTrace {
 public:
  struct Layer {
    int rows = 0;
    int k = 0;
    bool has_map = false;  // a residency map was passed to the router
    int draft_from_row = -1;
    routing::MoceParams moce;
    std::vector<float> probs;       // [rows][E]
    std::vector<uint8_t> resident;  // [E] when has_map
    std::vector<int32_t> ids;       // [rows][k]
  };

  void enable(int n_layers, int64_t n_expert);
  void disable();
  bool on() const { return on_; }
  int64_t n_expert() const { return n_expert_; }
  const std::vector<Layer>& layers() const { return layers_; }

  void record(int layer, const float* probs, int rows, const int32_t* ids, int k, const uint8_t* resident,
              const routing::MoceParams& moce, int draft_from_row);

 private:
  bool on_ = false;
  int64_t n_expert_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace strata::experts
