#include "strata/config/settings.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "strata/config/gemv_tile.h"
#include "strata/cpu/features.h"
#include "strata/util/error.h"

extern char** environ;

namespace strata::config {
namespace {

constexpr const char* kSchedule = "STRATA_METAL_SPEC_MIN_P_SCHEDULE";
constexpr const char* kMinCumP = "STRATA_METAL_SPEC_MIN_CUM_P";
constexpr const char* kSink = "STRATA_METAL_MTP_SINK";
constexpr const char* kWin = "STRATA_METAL_MTP_WIN";
constexpr const char* kMtpQ4 = "STRATA_METAL_MTP_Q4";
constexpr const char* kMtpQ5 = "STRATA_METAL_MTP_Q5";
constexpr const char* kMtpDraftQ4 = "STRATA_METAL_MTP_DRAFT_Q4";
constexpr const char* kSpecSample = "STRATA_SPEC_SAMPLE";
constexpr const char* kKvType = "STRATA_KV_TYPE";
constexpr const char* kMoceBonus = "STRATA_MOCE_BONUS";
constexpr const char* kMoceRank1 = "STRATA_MOCE_RANK1";
constexpr const char* kMoceProtect = "STRATA_MOCE_PROTECT";
constexpr const char* kMoceDraft = "STRATA_MOCE_DRAFT";
constexpr const char* kMoceWindow = "STRATA_MOCE_WINDOW";
constexpr const char* kMoceWindowCut = "STRATA_MOCE_WINDOW_CUT";
constexpr const char* kMoceDrafterResident = "STRATA_MOCE_DRAFTER_RESIDENT";
constexpr const char* kMetallib = "STRATA_METALLIB";
constexpr const char* kMetalMtpTile = "STRATA_METAL_MTP_TILE";
constexpr const char* kExpertMode = "STRATA_EXPERT_MODE";
constexpr const char* kExpertCache = "STRATA_EXPERT_CACHE";
constexpr const char* kExpertDirectIo = "STRATA_EXPERT_DIRECT_IO";
constexpr const char* kExpertIoThreads = "STRATA_EXPERT_IO_THREADS";
constexpr const char* kExpertPrefetch = "STRATA_EXPERT_PREFETCH";
constexpr const char* kIsa = "STRATA_ISA";
constexpr const char* kRepack = "STRATA_REPACK";
constexpr const char* kPrefetch = "STRATA_PREFETCH";
constexpr std::size_t kMaxPath = 4096;

constexpr double kMaxLogBonus = 8.0;
constexpr double kMaxRank1 = 1024.0;

const std::string* find(const EnvMap& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// Collects the first problem of one group; the group's values apply only if there was none.
struct Group {
  explicit Group(const char* what_falls_back) : fallback(what_falls_back) {}
  const char* fallback;  // what the rejection means, for the diagnostic
  std::string problem;
  bool failed() const { return !problem.empty(); }
  template <class T>
  std::optional<T> take(const char* name, const Parsed<T>& p) {
    if (p.value) return p.value;
    if (problem.empty()) problem = std::string(name) + ": " + p.error;
    return std::nullopt;
  }
  void reject(const char* name, const std::string& why) {
    if (problem.empty()) problem = std::string(name) + ": " + why;
  }
  std::string diagnostic() const { return problem + " — " + fallback; }
};

std::string lower(std::string_view s) {
  std::string l(trim(s));
  for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return l;
}

// 'text', at most 32 characters of it (built by appends: GCC 12 warns falsely on chained operator+
// with a leading literal).
std::string quoted(std::string_view text) {
  std::string q;
  q += '\'';
  q.append(text.data(), std::min<std::size_t>(text.size(), 32));
  if (text.size() > 32) q += "...";
  q += '\'';
  return q;
}

// "auto" or a boolean word (parse_bool's), any case, as one of three values: the settings whose default
// lets strata decide (direct I/O, expert prefetch, repacking).
template <class T>
Parsed<T> parse_auto_on_off(std::string_view text, T automatic, T on, T off) {
  const std::string m = lower(text);
  if (m == "auto") return Parsed<T>::ok(automatic);
  const Parsed<bool> b = parse_bool(m);
  if (!b.value) return Parsed<T>::fail(quoted(text) + " is not auto, on or off");
  return Parsed<T>::ok(*b.value ? on : off);
}

// The expert store (docs/experts.md): one group, the defaults (mmap) when any value is bad.
void parse_experts(const EnvMap& env, ParseResult& out) {
  Group g{"the expert-store settings fall back to their defaults (mmap)"};
  ExpertSettings e;
  if (const auto* v = find(env, kExpertMode)) {
    const std::string m = lower(*v);
    if (m == "mmap")
      e.mode = experts::ExpertMode::Mmap;
    else if (m == "stream")
      e.mode = experts::ExpertMode::Stream;
    else
      g.reject(kExpertMode, quoted(*v) + " is not mmap or stream");
  }
  if (const auto* v = find(env, kExpertCache)) {
    if (auto c = g.take(kExpertCache, parse_cache_size(*v))) {
      e.cache_bytes = c->bytes;
      e.cache_fraction = c->fraction;
    }
  }
  if (const auto* v = find(env, kExpertDirectIo))
    if (auto x = g.take(kExpertDirectIo,
                        parse_auto_on_off(*v, experts::DirectIo::Auto, experts::DirectIo::On, experts::DirectIo::Off)))
      e.direct_io = *x;
  if (const auto* v = find(env, kExpertIoThreads))
    if (auto x = g.take(kExpertIoThreads, parse_int(*v, 0, 64))) e.io_threads = static_cast<int>(*x);
  if (const auto* v = find(env, kExpertPrefetch))
    if (auto x = g.take(kExpertPrefetch,
                        parse_auto_on_off(*v, experts::Prefetch::Auto, experts::Prefetch::On, experts::Prefetch::Off)))
      e.prefetch = *x;
  if (g.failed())
    out.diagnostics.push_back(g.diagnostic());
  else
    out.settings.experts = e;
}

}  // namespace

float RetentionSettings::step_floor(int step, float caller_min_p) const {
  if (schedule.size == 0) return caller_min_p;
  const int i = step < schedule.size ? (step < 0 ? 0 : step) : schedule.size - 1;
  return schedule.values[static_cast<size_t>(i)];
}

routing::MoceParams MoceSettings::params() const {
  routing::MoceParams p;
  p.resident_bonus = std::exp(log_bonus);
  p.rank1_scale = rank1;
  p.protect = protect;
  p.draft = draft;
  p.window_bonus = window_log_bonus > 0.0f ? std::exp(window_log_bonus) : 1.0f;
  return p;
}

const std::vector<SettingInfo>& known_settings() {
  static const std::vector<SettingInfo> v = {
      {kSchedule, "retention", "unset",
       "1 to 8 comma-separated probabilities in [0, 1]; per-step draft floor, the last repeats; a valid value "
       "(even \"0\") turns the new retention policy on"},
      {kMinCumP, "retention", "unset (0)",
       "probability in [0, 1]; keep draft j only while p0·…·pj >= it (0 disables the gate); a valid value turns "
       "the new retention policy on"},
      {kSink, "mtp", "64", "integer 0..1024; drafter attention sink cells (0 = off)"},
      {kWin, "mtp", "256", "integer 1..2051; drafter attention window in cells"},
      {kMtpQ4, "mtp", "0", "1 or 0; requantize the drafter's q/o, fc and shared expert to Q4_0 (Lloyd) at load"},
      {kMtpQ5, "mtp", "0", "1 or 0; requantize the drafter's q/o, fc and shared expert to Q5_0 at load"},
      {kMtpDraftQ4, "mtp", "1",
       "1 or 0; the drafter in Q4_0 (ggml's rule) where stored wider: R-11's tensors unless _Q4 / _Q5, and a "
       "gathered head"},
      {kSpecSample, "sampling", "exact", "exact | greedy: verification rule for temperature > 0"},
      {kKvType, "kv", "auto",
       "auto | f32 | f16 | int8: how K/V cells are stored (auto: int8 for strata, fp16 for qwen3moe / glm4moe "
       "on x86-64 with AVX2+FMA+F16C, else f32); cpu backend, not deepseek4"},
      {kMoceBonus, "moce", "0", "log-bonus λ in [-8, 8]; resident scores are scaled by m = e^λ when m > 1"},
      {kMoceRank1, "moce", "1", "rank-1 scale r in (0, 1024]; used only when r > 1 and protect > 1"},
      {kMoceProtect, "moce", "0", "integer 0..64 (r_prot); first rank that gets the bonus is max(1, r_prot)"},
      {kMoceDraft, "moce", "0", "boolean; draft rows get m = b² and r_prot = 1"},
      {kMoceWindow, "moce", "0",
       "log-bonus λw in [0, 8] (0 = off); streaming-aware verification windows: draft rows are routed with the "
       "draft-row rule, b = e^λw, against the residency plus every expert the window has already requested"},
      {kMoceWindowCut, "moce", "0.5",
       "probability τ in [0, 1] (0 = off); exact window cuts in stream mode: a verification window drops a draft "
       "row, and the rows after it, at the first layer where it would read an expert that is not resident and "
       "not read for an earlier row, unless the product of the drafter's probabilities before it is >= τ"},
      {kMoceDrafterResident, "moce", "1",
       "boolean; stream mode: the drafter's rows pick their experts among the resident ones (when at least K "
       "are), so draft steps read no expert; changes drafts only, never the verified text"},
      {kMetallib, "metal", "unset",
       "path of strata.metallib (the metal backend's compiled kernels; at most 4096 bytes)"},
      {kMetalMtpTile, "metal", "unset",
       "L,R,S,K: the drafter's wide-class GEMV tile on the Metal backends (L in {8,16,32}, R in {1,2,4}, S in "
       "{1,2,4,8}, K in {1,2,4,8}, R*K <= 16)"},
      {kExpertMode, "experts", "mmap", "mmap | stream; routed experts from the file mapping or a bounded resident set"},
      {kExpertCache, "experts", "0",
       "resident-set size: bytes with an optional K/M/G/T suffix (\"512M\"), a percentage of all experts (\"25%\") "
       "or 0 = every expert"},
      {kExpertDirectIo, "experts", "auto", "auto | on | off; O_DIRECT reads of the stream mode"},
      {kExpertIoThreads, "experts", "4", "integer 0..64; expert reader threads (0 = read on the compute thread)"},
      {kExpertPrefetch, "experts", "auto",
       "auto | on | off; stream mode: read the experts each MoE layer's router ranks top-K for the next layer "
       "while it computes (auto: per layer, while at least 70 % of those reads get used)"},
      {kIsa, "cpu", "auto",
       "auto | avx512 | avx2 | neon-i8mm | neon-dotprod | neon | scalar; force a lower CPU kernel path (process-wide)"},
      {kRepack, "cpu", "auto",
       "auto | on | off; interleave Q4_0/Q5_0/Q5_1/Q8_0/Q2_K..Q6_K/IQ4_XS/IQ4_NL weight rows at load for the kernels"},
  };
  return v;
}

ParseResult parse_settings(const EnvMap& env) {
  ParseResult out;
  Settings& s = out.settings;

  // Retention: both variables or neither.
  {
    Group g{"retention settings ignored, the caller's min_p applies"};
    RetentionSettings r;
    if (const auto* v = find(env, kSchedule)) {
      if (auto sch = g.take(kSchedule, parse_schedule(*v))) {
        r.schedule = *sch;
        r.policy_on = true;
      }
    }
    if (const auto* v = find(env, kMinCumP)) {
      if (auto x = g.take(kMinCumP, parse_number(*v))) {
        if (*x < 0.0 || *x > 1.0) g.reject(kMinCumP, std::string(trim(*v)) + " is outside [0, 1]");
        r.min_cum_p = *x;
        r.policy_on = true;
      }
    }
    if (g.failed())
      out.diagnostics.push_back(g.diagnostic());
    else
      s.retention = r;
  }

  // MTP drafter cells.
  {
    Group g{"MTP settings ignored, defaults sink 64 / window 256 / the Q4_0 drafter apply"};
    MtpCellSettings m;
    if (const auto* v = find(env, kSink))
      if (auto x = g.take(kSink, parse_int(*v, 0, 1024))) m.sink = static_cast<int>(*x);
    if (const auto* v = find(env, kWin))
      if (auto x = g.take(kWin, parse_int(*v, 1, 2051))) m.window = static_cast<int>(*x);
    // exactly "1" or "0" (whitespace allowed); both on is a conflict.
    auto flag = [&](const char* name, bool& dst) {
      const auto* v = find(env, name);
      if (v == nullptr) return;
      const std::string t(trim(*v));
      if (t == "1")
        dst = true;
      else if (t == "0")
        dst = false;
      else
        g.reject(name, "expected 1 or 0, got \"" + *v + "\"");
    };
    flag(kMtpQ4, m.q4);
    flag(kMtpQ5, m.q5);
    flag(kMtpDraftQ4, m.draft_q4);
    if (m.q4 && m.q5) g.reject(kMtpQ4, std::string("and ") + kMtpQ5 + " are both 1; choose one drafter format");
    if (g.failed())
      out.diagnostics.push_back(g.diagnostic());
    else
      s.mtp = m;
  }

  // Verification rule.
  if (const auto* v = find(env, kSpecSample)) {
    const std::string l = lower(*v);
    if (l == "exact")
      s.spec_sample = sampling::SpecSample::Exact;
    else if (l == "greedy")
      s.spec_sample = sampling::SpecSample::Greedy;
    else
      out.diagnostics.push_back(std::string(kSpecSample) + ": expected exact or greedy, got \"" + *v +
                                "\" — exact speculative sampling applies");
  }

  // K/V cell storage.
  if (const auto* v = find(env, kKvType)) {
    const std::string l = lower(*v);
    if (l == "f32")
      s.kv_type = model::KvType::F32;
    else if (l == "f16")
      s.kv_type = model::KvType::F16;
    else if (l == "int8")
      s.kv_type = model::KvType::Int8;
    else if (l != "auto")
      out.diagnostics.push_back(std::string(kKvType) + ": expected auto, f32, f16 or int8, got " + quoted(*v) +
                                " — the model's own K/V type applies");
  }

  // MOCE routing.
  {
    Group g{"MOCE settings ignored, plain top-K routing applies"};
    MoceSettings m;
    if (const auto* v = find(env, kMoceBonus)) {
      if (auto x = g.take(kMoceBonus, parse_number(*v))) {
        if (std::fabs(*x) > kMaxLogBonus) g.reject(kMoceBonus, std::string(trim(*v)) + " is outside [-8, 8]");
        m.log_bonus = static_cast<float>(*x);
      }
    }
    if (const auto* v = find(env, kMoceRank1)) {
      if (auto x = g.take(kMoceRank1, parse_number(*v))) {
        if (!(*x > 0.0 && *x <= kMaxRank1)) g.reject(kMoceRank1, std::string(trim(*v)) + " is outside (0, 1024]");
        m.rank1 = static_cast<float>(*x);
      }
    }
    if (const auto* v = find(env, kMoceProtect))
      if (auto x = g.take(kMoceProtect, parse_int(*v, 0, routing::kMaxTopK))) m.protect = static_cast<int>(*x);
    if (const auto* v = find(env, kMoceDraft))
      if (auto x = g.take(kMoceDraft, parse_bool(*v))) m.draft = *x;
    if (const auto* v = find(env, kMoceWindow)) {
      if (auto x = g.take(kMoceWindow, parse_number(*v))) {
        if (!(*x >= 0.0 && *x <= kMaxLogBonus)) g.reject(kMoceWindow, std::string(trim(*v)) + " is outside [0, 8]");
        m.window_log_bonus = static_cast<float>(*x);
      }
    }
    if (const auto* v = find(env, kMoceWindowCut)) {
      if (auto x = g.take(kMoceWindowCut, parse_number(*v))) {
        if (!(*x >= 0.0 && *x <= 1.0)) g.reject(kMoceWindowCut, std::string(trim(*v)) + " is outside [0, 1]");
        m.window_cut = static_cast<float>(*x);
      }
    }
    if (const auto* v = find(env, kMoceDrafterResident))
      if (auto x = g.take(kMoceDrafterResident, parse_bool(*v))) m.drafter_resident = *x;
    if (g.failed())
      out.diagnostics.push_back(g.diagnostic());
    else
      s.moce = m;
  }

  // The Metal backend's library and drafter tile.
  {
    Group g{"Metal settings ignored, no metallib and the default drafter tile apply"};
    MetalSettings m;
    if (const auto* v = find(env, kMetallib)) {
      const std::string t(trim(*v));
      if (t.empty())
        g.reject(kMetallib, "empty");
      else if (t.size() > kMaxPath)
        g.reject(kMetallib, "longer than 4096 bytes");
      else
        m.metallib = t;
    }
    if (const auto* v = find(env, kMetalMtpTile)) {
      try {
        m.mtp_tile = tile_string(parse_gemv_tile(*v));
      } catch (const Error& e) {
        g.reject(kMetalMtpTile, e.what());
      }
    }
    if (g.failed())
      out.diagnostics.push_back(g.diagnostic());
    else
      s.metal = m;
  }

  parse_experts(env, out);
  s.cpu = parse_cpu_group(env, out.diagnostics);
  return out;
}

cpu::CpuSettings parse_cpu_group(const EnvMap& env, std::vector<std::string>& diagnostics) {
  cpu::CpuSettings c;
  const std::size_t before = diagnostics.size();
  if (const auto* v = find(env, kIsa)) {
    const std::string l = lower(*v);
    bool known = l == "auto";
    if (l == cpu::kAmxPathName) {
      known = true;
      if (cpu::amx_status().usable) {
        c.isa = cpu::Isa::Avx512;
        c.amx = true;
      } else {
        diagnostics.push_back(std::string("STRATA_ISA: avx512+amx is not available here (AMX: ") +
                              cpu::amx_status().detail + "); using " + cpu::isa_name(cpu::best_isa()));
      }
    }
    for (cpu::Isa isa : cpu::all_isas()) {
      if (l != cpu::isa_name(isa)) continue;
      known = true;
      if (cpu::isa_supported(isa)) {
        c.isa = isa;
      } else {
        std::string msg = "STRATA_ISA: ";
        msg += cpu::isa_name(isa);
        msg += " is not available on this build and CPU (available:";
        for (cpu::Isa a : cpu::compiled_isas())
          if (cpu::isa_supported(a)) (msg += ' ') += cpu::isa_name(a);
        msg += "); using ";
        msg += cpu::isa_name(cpu::best_isa());
        diagnostics.push_back(std::move(msg));
      }
    }
    if (!known)
      diagnostics.push_back("STRATA_ISA: " + quoted(*v) +
                            " is not auto, avx512+amx, avx512, avx2, neon-i8mm, neon-dotprod, neon or scalar");
  }
  if (const auto* v = find(env, kRepack)) {
    const Parsed<cpu::RepackMode> r =
        parse_auto_on_off(*v, cpu::RepackMode::Auto, cpu::RepackMode::On, cpu::RepackMode::Off);
    if (r.value)
      c.repack = *r.value;
    else
      diagnostics.push_back("STRATA_REPACK: " + r.error);
  }
  if (const auto* v = find(env, kPrefetch)) {
    const std::string l = lower(*v);
    if (l == "off") {
      c.prefetch = 0;
    } else if (l != "auto") {
      const Parsed<int64_t> n = parse_int(l, 0, 65536);
      if (n.value)
        c.prefetch = static_cast<std::size_t>(*n.value);
      else
        diagnostics.push_back("STRATA_PREFETCH: " + quoted(*v) + " is not auto, off or a byte count 0..65536");
    }
  }
  if (diagnostics.size() != before) c = cpu::CpuSettings{};  // a group is never half-applied
  return c;
}

Settings load_settings_strict(const EnvMap& env) {
  ParseResult r = parse_settings(env);
  if (!r.diagnostics.empty()) {
    std::string msg;
    for (const auto& d : r.diagnostics) msg += (msg.empty() ? "" : "; ") + d;
    throw_error(ErrorKind::Config, msg);
  }
  return r.settings;
}

EnvMap environ_map() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr || std::strncmp(*e, "STRATA_", 7) != 0) continue;
    env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

}  // namespace strata::config
