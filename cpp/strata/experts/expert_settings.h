#pragma once
// The expert-store settings (SPEC §2.11 style, docs/experts.md):
//   STRATA_EXPERT_MODE        mmap | stream                       (default mmap)
//   STRATA_EXPERT_CACHE       resident-set size: bytes with an optional K/M/G/T suffix (powers of
//                             1024, "512M", "1.5G", "2GiB"), a percentage of all experts ("25%"),
//                             or 0 = room for every expert             (default 0)
//   STRATA_EXPERT_DIRECT_IO   auto | on | off                     (default auto)
//   STRATA_EXPERT_IO_THREADS  0..64 reader threads, 0 = read on the compute thread (default 4)
// They form one group: any malformed value rejects the whole group with one diagnostic and the
// defaults apply (mmap) — never half-applied.
#include <optional>
#include <string>
#include <string_view>

#include "strata/config/parse.h"
#include "strata/config/settings.h"
#include "strata/experts/expert_store.h"

namespace strata::experts {

// A cache size: bytes, or a fraction of all experts.
struct CacheSize {
  uint64_t bytes = 0;
  double fraction = 0.0;  // > 0: a fraction in (0, 1]
};
config::Parsed<CacheSize> parse_cache_size(std::string_view text);

struct ExpertSettingsResult {
  ExpertStoreConfig config;
  std::optional<std::string> diagnostic;  // set when the group was rejected (config = defaults)
};
ExpertSettingsResult parse_expert_settings(const config::EnvMap& env);

}  // namespace strata::experts
