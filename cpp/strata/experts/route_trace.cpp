#include "strata/experts/route_trace.h"

#include "strata/util/error.h"

namespace strata::experts {

void RouteTrace::enable(int n_layers, int64_t n_expert) {
  layers_.assign(static_cast<std::size_t>(n_layers), Layer{});
  n_expert_ = n_expert;
  on_ = true;
}

void RouteTrace::disable() {
  on_ = false;
  layers_.clear();
}

void RouteTrace::record(int layer, const float* probs, int rows, const int32_t* ids, int k, const uint8_t* resident,
                        const routing::MoceParams& moce, int draft_from_row) {
  if (!on_) return;
  if (layer < 0 || layer >= static_cast<int>(layers_.size()))
    throw_error(ErrorKind::Internal, "RouteTrace: layer " + std::to_string(layer) + " out of range");
  Layer& l = layers_[static_cast<std::size_t>(layer)];
  const std::size_t E = static_cast<std::size_t>(n_expert_);
  l.rows = rows;
  l.k = k;
  l.moce = moce;
  l.draft_from_row = draft_from_row;
  l.probs.assign(probs, probs + static_cast<std::size_t>(rows) * E);
  l.ids.assign(ids, ids + static_cast<std::size_t>(rows) * static_cast<std::size_t>(k));
  l.has_map = resident != nullptr;
  if (resident)
    l.resident.assign(resident, resident + E);
  else
    l.resident.clear();
}

}  // namespace strata::experts
