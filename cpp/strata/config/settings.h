#pragma once
// The validated STRATA_* settings of an engine, parsed once from an environment map: the one
// validator of every setting C++ reads (Python's strata.Config hands its values here and keeps
// only the settings of its own layer: threads, backend, context, speculation). Settings are
// validated in groups; a group with any malformed, non-finite,
// out-of-range, too-long or empty value is rejected as a whole with ONE diagnostic and falls back to
// its defaults (for retention: off, i.e. the caller's min_p) — a group is never half-applied.
// Every setting, its default and range: docs/settings.md (and known_settings() below).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strata/config/parse.h"
#include "strata/cpu/cpu_settings.h"
#include "strata/experts/expert_mode.h"
#include "strata/model/hparams.h"
#include "strata/routing/router.h"
#include "strata/sampling/policy.h"

namespace strata::config {

// STRATA_METAL_SPEC_MIN_P_SCHEDULE + STRATA_METAL_SPEC_MIN_CUM_P.
struct RetentionSettings {
  Schedule schedule;       // size 0: no schedule (the caller's min_p is the per-step floor)
  double min_cum_p = 0.0;  // prefix-product gate; 0 disables it
  bool policy_on = false;  // either variable validly set: fail-closed checks, reject before writing

  // The per-step floor of draft step `step` (0-based): the schedule's value (the last one repeats),
  // else the caller's min_p.
  float step_floor(int step, float caller_min_p) const;
};

// MOCE routing: STRATA_MOCE_BONUS (λ), STRATA_MOCE_RANK1 (r), STRATA_MOCE_PROTECT (r_prot),
// STRATA_MOCE_DRAFT, STRATA_MOCE_WINDOW (streaming-aware verification windows, routing/window_routing.h).
struct MoceSettings {
  float log_bonus = 0.0f;  // λ; m = e^λ
  float rank1 = 1.0f;
  int protect = 0;
  bool draft = false;
  float window_log_bonus = 0.0f;  // λw; 0 = off, else draft rows use b = e^λw against the window's residency
  // τ in [0, 1]; 0 = off: exact window cuts (routing::window_rows_kept) for draft rows whose chance of being
  // needed (the product of the drafter's probabilities of the drafts before them) is below τ.
  float window_cut = 0.5f;
  // Stream mode: the drafter's rows route among the resident experts (no draft step reads an expert).
  bool drafter_resident = true;
  routing::MoceParams params() const;
};

// STRATA_METAL_MTP_SINK, STRATA_METAL_MTP_WIN; R-11: STRATA_METAL_MTP_Q4 / STRATA_METAL_MTP_Q5
// ("1" or "0"; both on is an error) requantize the drafter weights at load (model/drafter_requant.h).
struct MtpCellSettings {
  int sink = 64;     // 0 = off, max 1024
  int window = 256;  // 1..2051
  bool q4 = false;   // Q4_0 (Lloyd fit)
  bool q5 = false;   // Q5_0
  // The drafter in Q4_0 by ggml's rule where stored wider (STRATA_METAL_MTP_DRAFT_Q4, CPU backend): the
  // R-11 tensors at load unless q4 / q5 choose their format (model::DrafterRequant::Q4Ggml), and the
  // restricted-vocabulary head when it is a gathered copy (engine::MtpConfig::head_q4). Drafts only.
  bool draft_q4 = true;
};

// The Metal backend: STRATA_METALLIB (the path of strata.metallib, for backend "metal") and
// STRATA_METAL_MTP_TILE (the drafter's wide-class GEMV tile "L,R,S,K", config/gemv_tile.h).
struct MetalSettings {
  std::string metallib;  // "" = none given
  std::string mtp_tile;  // "" = the default tiles
};

// The expert store (docs/experts.md): STRATA_EXPERT_MODE, STRATA_EXPERT_CACHE (parse_cache_size),
// STRATA_EXPERT_DIRECT_IO, STRATA_EXPERT_IO_THREADS, STRATA_EXPERT_PREFETCH.
struct ExpertSettings {
  experts::ExpertMode mode = experts::ExpertMode::Mmap;
  uint64_t cache_bytes = 0;     // 0 = room for every expert
  double cache_fraction = 0.0;  // > 0: that fraction of all experts (cache_bytes ignored)
  experts::DirectIo direct_io = experts::DirectIo::Auto;
  int io_threads = 4;                                    // 0..64; 0 = read on the compute thread
  experts::Prefetch prefetch = experts::Prefetch::Auto;  // read a layer's predicted experts a layer early
};

struct Settings {
  RetentionSettings retention;
  MoceSettings moce;
  MtpCellSettings mtp;
  MetalSettings metal;
  ExpertSettings experts;
  cpu::CpuSettings cpu;  // STRATA_ISA (process-wide kernel path), STRATA_REPACK (cpu/cpu_settings.h)
  sampling::SpecSample spec_sample = sampling::SpecSample::Exact;  // STRATA_SPEC_SAMPLE=exact|greedy
  // STRATA_KV_TYPE=auto|f32|f16|int8: how the K/V cells are stored (nullopt = auto: the model's own,
  // int8 for strata, f32 for qwen3moe / glm4moe). CPU backend; not deepseek4.
  std::optional<model::KvType> kv_type;
};

// One documented setting: its variable, group, default (as text) and rule.
struct SettingInfo {
  const char* name;
  const char* group;
  const char* default_value;
  const char* rule;
};
const std::vector<SettingInfo>& known_settings();

struct ParseResult {
  Settings settings;
  std::vector<std::string> diagnostics;  // at most one per rejected group
};

// Pure: validates `env` (absent key = unset) without logging.
ParseResult parse_settings(const EnvMap& env);
// Throws strata::Error(Config) with the diagnostics if any group is rejected.
Settings load_settings_strict(const EnvMap& env);

// The cpu group alone (parse_settings runs it too): the process's kernel path needs it before any
// engine exists (cpu::process_cpu_settings). Appends at most one diagnostic per problem.
cpu::CpuSettings parse_cpu_group(const EnvMap& env, std::vector<std::string>& diagnostics);

// The STRATA_* variables of the process environment (the one place the environment is read).
EnvMap environ_map();

}  // namespace strata::config
