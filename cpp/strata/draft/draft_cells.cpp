#include "strata/draft/draft_cells.h"

#include <algorithm>
#include <string>

#include "strata/util/error.h"

namespace strata::draft {

DraftCells::DraftCells(int sink, int window) : sink_(sink), window_(window) {
  if (sink < 0 || sink > 1024)
    throw_error(ErrorKind::Value, "draft cells: sink " + std::to_string(sink) + " is outside [0, 1024]");
  if (window < 1 || window > 2051)
    throw_error(ErrorKind::Value, "draft cells: window " + std::to_string(window) + " is outside [1, 2051]");
}

void DraftCells::wrote(int32_t c0, int32_t n) {
  if (c0 < 0 || n < 0)
    throw_error(ErrorKind::Value, "draft cells: wrote(" + std::to_string(c0) + ", " + std::to_string(n) + ")");
  const int32_t end = c0 + n;
  if (n == 0) {
    // Only marks stale: cut the sink and the run at c0 (a mark past the run changes nothing).
    sink_end_ = std::min(sink_end_, c0);
    if (c0 <= run0_)
      run0_ = run1_ = 0;
    else
      run1_ = std::min(run1_, c0);
    return;
  }
  // Sink prefix: cut at c0, then extend if the write continues it.
  if (sink_end_ > c0) sink_end_ = c0;
  if (n > 0 && c0 == sink_end_) sink_end_ = std::min<int32_t>(sink_, end);
  // Run: a write inside or right after the run continues it (cutting what lay past c0); a write
  // before it or after a gap starts a new one.
  if (run0_ < run1_ && run0_ <= c0 && c0 <= run1_) {
    run1_ = end;
  } else {
    run0_ = c0;
    run1_ = end;
  }
  if (run0_ == run1_) run0_ = run1_ = 0;
}

int DraftCells::draft_row_cells(int32_t pos, std::vector<int32_t>& out) const {
  if (run0_ >= run1_ || pos < run0_)
    throw_error(ErrorKind::Internal, "draft cells: draft row at cell " + std::to_string(pos) +
                                         " but the valid run is [" + std::to_string(run0_) + ", " +
                                         std::to_string(run1_) + ")");
  const int32_t first = std::max<int32_t>(run0_, pos - window_);
  const int32_t sink_part = std::min(sink_end_, first);
  out.resize(static_cast<size_t>(sink_part + (pos - first + 1)));
  size_t i = 0;
  for (int32_t c = 0; c < sink_part; ++c) out[i++] = c;
  for (int32_t c = first; c <= pos; ++c) out[i++] = c;
  return static_cast<int>(out.size());
}

void DraftCells::check_reads(std::span<const int32_t> cells, int32_t pos, int chain_step) const {
  if (run0_ >= run1_ || chain_step < 0 || pos != run1_ - 1 + chain_step)
    throw_error(ErrorKind::Internal, "draft cells: a draft row at cell " + std::to_string(pos) + ", chain step " +
                                         std::to_string(chain_step) + ", does not follow the valid run [" +
                                         std::to_string(run0_) + ", " + std::to_string(run1_) + ")");
  int32_t prev = -1;
  for (const int32_t c : cells) {
    const bool ok = c > prev && c <= pos && (c >= run1_ || valid(c));
    if (!ok)
      throw_error(ErrorKind::Internal, "draft cells: a draft row at cell " + std::to_string(pos) + " reads cell " +
                                           std::to_string(c) + " (sink [0, " + std::to_string(sink_end_) + "), run [" +
                                           std::to_string(run0_) + ", " + std::to_string(run1_) + "))");
    prev = c;
  }
}

}  // namespace strata::draft
