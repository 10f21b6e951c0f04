#include "strata/engine/cell_ledger.h"

#include <string>

#include "strata/util/error.h"

namespace strata::engine {

namespace {
constexpr uint64_t kEmptyPrefix = 0x5157a7a5eedULL;
}

CellLedger::CellLedger(int64_t n_cells)
    : main_(static_cast<std::size_t>(n_cells), 0),
      drafter_(static_cast<std::size_t>(n_cells), 0),
      kind_(static_cast<std::size_t>(n_cells), kNone) {}

uint64_t CellLedger::mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdULL;
  return h ^ (h >> 33);
}

void CellLedger::main_wrote(int64_t x, int32_t t) {
  const uint64_t prev = x > 0 ? main_[static_cast<std::size_t>(x - 1)] : kEmptyPrefix;
  main_[static_cast<std::size_t>(x)] = mix(prev, static_cast<uint32_t>(t));
}

void CellLedger::drafter_committed(int64_t c, int32_t next_token) {
  drafter_[static_cast<std::size_t>(c)] = mix(main_[static_cast<std::size_t>(c)], static_cast<uint32_t>(next_token));
  kind_[static_cast<std::size_t>(c)] = kCommitted;
}

void CellLedger::drafter_chain(int64_t c, uint64_t round) {
  drafter_[static_cast<std::size_t>(c)] = round;
  kind_[static_cast<std::size_t>(c)] = kChain;
}

void CellLedger::check_draft_row(std::span<const int32_t> cells, int64_t pos, const Chain& chain,
                                 int64_t n_past) const {
  ++rows_;
  auto fail = [&](int64_t c, const char* why) {
    throw_error(ErrorKind::Internal, "drafter: the draft row at cell " + std::to_string(pos) + " would read cell " +
                                         std::to_string(c) + ", which " + why);
  };
  for (const int32_t c32 : cells) {
    const int64_t c = c32;
    ++reads_;
    if (c == pos) continue;  // the row's own cell: written by this row before it is read
    if (c < 0 || c > pos || c >= static_cast<int64_t>(kind_.size())) fail(c, "lies outside the row's causal cells");
    const std::size_t i = static_cast<std::size_t>(c);
    if (c > chain.p) {
      if (kind_[i] != kChain || drafter_[i] != chain.round) fail(c, "is not a chain cell of this draft round");
      continue;
    }
    uint64_t want = 0;
    if (c == chain.p)
      want = mix(main_[i], static_cast<uint32_t>(chain.next));
    else if (c + 1 < n_past)
      want = main_[i + 1];
    else
      fail(c, "lies past the main model's cells");
    if (kind_[i] != kCommitted || drafter_[i] != want)
      fail(c, "does not hold the drafter's committed K/V of the current tokens");
  }
}

}  // namespace strata::engine
