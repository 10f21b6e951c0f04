// Retention settings and policy (SPEC §2.7, R-3) plus the other decode-loop settings (§2.11):
// every malformed form gives one diagnostic and a whole-group fallback; boundaries; the gate's
// rules; chained vs non-chained paths including legacy append-then-stop; a randomized cross-check.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "strata/config/settings.h"
#include "strata/draft/retention.h"
#include "strata/util/error.h"

using namespace strata::config;
using strata::draft::draft_nonchained;
using strata::draft::retain_chained;
using strata::draft::RetentionGate;

namespace {

constexpr const char* kSched = "STRATA_METAL_SPEC_MIN_P_SCHEDULE";
constexpr const char* kCum = "STRATA_METAL_SPEC_MIN_CUM_P";

bool retention_is_off(const RetentionSettings& r) { return !r.policy_on && r.schedule.size == 0 && r.min_cum_p == 0.0; }

RetentionSettings retention(const EnvMap& env) {
  const auto r = parse_settings(env);
  CHECK(r.diagnostics.empty());
  return r.settings.retention;
}

}  // namespace

TEST(malformed_schedules_one_diagnostic_and_fallback) {
  const std::vector<std::string> bad = {"",        "   ",       "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9",
                                        "nan",     "NaN",       "inf",
                                        "-inf",    "infinity",  "-0.1",
                                        "1.5",     "1.0000001", "0.5,,0.3",
                                        ",0.5",    "0.5,",      "abc",
                                        "0.5x",    "0x1p-1",    "1e",
                                        ".",       "0.5 0.3",   "0.5;0.3",
                                        " , ",     "1e400",     "--0.5",
                                        "0.5,nan", "0.2,0.3,-1"};
  for (const auto& v : bad) {
    const auto r = parse_settings({{kSched, v}});
    CHECK_MSG(r.diagnostics.size() == 1, "schedule \"" + v + "\"");
    CHECK_MSG(retention_is_off(r.settings.retention), "schedule \"" + v + "\"");
    if (!r.diagnostics.empty()) CHECK(r.diagnostics[0].find(kSched) != std::string::npos);
    CHECK_THROWS(load_settings_strict({{kSched, v}}));
  }
}

TEST(malformed_cum_p_and_never_half_apply) {
  for (const std::string v : {"", "nan", "-0.5", "1.01", "x", "0.5,0.5", "inf"}) {
    const auto r = parse_settings({{kCum, v}});
    CHECK_MSG(r.diagnostics.size() == 1, "min_cum_p \"" + v + "\"");
    CHECK(retention_is_off(r.settings.retention));
  }
  // A valid schedule with a malformed gate: the whole new configuration is rejected, once.
  auto r = parse_settings({{kSched, "0.3"}, {kCum, "2"}});
  CHECK_EQ(r.diagnostics.size(), size_t(1));
  CHECK(retention_is_off(r.settings.retention));
  r = parse_settings({{kSched, "0.3,,"}, {kCum, "0.2"}});
  CHECK_EQ(r.diagnostics.size(), size_t(1));
  CHECK(retention_is_off(r.settings.retention));
  r = parse_settings({{kSched, "bad"}, {kCum, "bad"}});  // both malformed: still one diagnostic
  CHECK_EQ(r.diagnostics.size(), size_t(1));
  CHECK(retention_is_off(r.settings.retention));
  // Other groups are unaffected by a rejected retention group.
  r = parse_settings({{kSched, "bad"}, {"STRATA_METAL_MTP_SINK", "32"}});
  CHECK_EQ(r.settings.mtp.sink, 32);
}

TEST(valid_schedules) {
  auto r = retention({{kSched, " 0.5 , 0.25,1 "}});
  CHECK(r.policy_on);
  CHECK_EQ(r.schedule.size, 3);
  CHECK_EQ(r.step_floor(0, 0.9f), 0.5f);
  CHECK_EQ(r.step_floor(1, 0.9f), 0.25f);
  CHECK_EQ(r.step_floor(2, 0.9f), 1.0f);
  CHECK_EQ(r.step_floor(7, 0.9f), 1.0f);                         // the last repeats
  r = retention({{kSched, "0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8"}});  // 8 values: the maximum
  CHECK_EQ(r.schedule.size, 8);
  CHECK_EQ(r.step_floor(100, 0.0f), 0.8f);
  r = retention({{kSched, "1e-1,+0.5,0,1.0\t"}});
  CHECK_EQ(r.schedule.size, 4);
  CHECK_EQ(r.step_floor(0, 0.0f), 0.1f);
  r = retention({{kSched, "0"}});  // opts in with no per-step floor
  CHECK(r.policy_on);
  CHECK_EQ(r.step_floor(3, 0.7f), 0.0f);
  r = retention({{kCum, "0"}});  // a valid gate value opts in; 0 disables the gate itself
  CHECK(r.policy_on);
  CHECK_EQ(r.min_cum_p, 0.0);
  CHECK_EQ(r.step_floor(0, 0.7f), 0.7f);  // no schedule: the caller's min_p
  r = retention({});
  CHECK(retention_is_off(r));
  CHECK_EQ(r.step_floor(2, 0.3f), 0.3f);
}

TEST(gate_rules) {
  // Equality passes (per step and cumulative); the failing step ends the prefix.
  auto s = retention({{kSched, "0.5"}});
  CHECK_EQ(retain_chained(s, 0.0f, std::vector<float>{0.5f, 0.5f, 0.49f, 0.9f}), 2);
  CHECK_EQ(retain_chained(s, 0.0f, std::vector<float>{0.9f, 0.1f, 0.9f}), 1);
  s = retention({{kCum, "0.25"}});
  CHECK_EQ(retain_chained(s, 0.0f, std::vector<float>{0.5f, 0.5f, 0.5f}), 2);  // 0.25 >= 0.25 passes
  // AND: the per-step floor (caller's min_p 0.6) fails first although the product would pass ...
  CHECK_EQ(retain_chained(s, 0.6f, std::vector<float>{0.9f, 0.55f, 0.9f}), 1);
  // ... and the product fails although every step passes its floor.
  CHECK_EQ(retain_chained(s, 0.3f, std::vector<float>{0.6f, 0.5f, 0.9f, 0.9f}), 3);  // .6, .3, .27 pass; .243 fails
  // Schedule per step, last repeats, any order.
  s = retention({{kSched, "0.2,0.8,0.4"}});
  CHECK_EQ(retain_chained(s, 0.99f, std::vector<float>{0.3f, 0.8f, 0.5f, 0.4f, 0.39f}), 4);
  // Fail closed with the policy on; the old comparison (fails iff p < min_p) when off.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  s = retention({{kSched, "0"}});
  for (float bad : {nan, inf, -inf, -0.1f, 1.5f}) {
    CHECK_EQ(retain_chained(s, 0.0f, std::vector<float>{0.9f, bad, 0.9f}), 1);
    CHECK_EQ(retain_chained(RetentionSettings{}, 0.0f, std::vector<float>{0.9f, bad, 0.9f}),
             (bad == -inf || bad == -0.1f) ? 1 : 3);
  }
  CHECK_EQ(retain_chained(s, 0.0f, std::vector<float>{0.0f, 0.0f}), 2);  // "0": no floor at all
  // The product is taken in double and reset each round.
  s = retention({{kCum, "1e-30"}});
  RetentionGate gate(s, 0.0f);
  gate.begin_round();
  for (int j = 0; j < 4; ++j) CHECK(gate.passes(j, 1e-7f));  // 1e-28 >= 1e-30: no float underflow
  CHECK(!gate.passes(4, 1e-7f));
  gate.begin_round();
  CHECK(gate.passes(0, 1e-7f));
}

TEST(chained_vs_nonchained_and_legacy_append_then_stop) {
  const std::vector<float> chain = {0.9f, 0.2f, 0.9f, 0.9f};
  auto run_nonchained = [&](const RetentionSettings& s, float min_p, int max_steps, int* calls,
                            std::vector<int32_t>* toks, std::vector<float>* ps) {
    toks->assign(static_cast<size_t>(max_steps), -1);
    ps->assign(static_cast<size_t>(max_steps), -1.0f);
    *calls = 0;
    return draft_nonchained(
        s, min_p, max_steps,
        [&](int step) {
          ++*calls;
          return std::pair<int32_t, float>(100 + step, chain[static_cast<size_t>(step)]);
        },
        std::span<int32_t>(*toks), std::span<float>(*ps));
  };
  int calls = 0;
  std::vector<int32_t> toks;
  std::vector<float> ps;
  // Legacy (unset): chained keeps the passing prefix; non-chained appends the failing one then stops.
  CHECK_EQ(retain_chained(RetentionSettings{}, 0.5f, chain), 1);
  CHECK_EQ(run_nonchained(RetentionSettings{}, 0.5f, 4, &calls, &toks, &ps), 2);
  CHECK_EQ(calls, 2);
  CHECK_EQ(toks[1], 101);
  CHECK_EQ(ps[1], 0.2f);
  // Policy on (schedule 0.5): both paths reject before writing or counting.
  const auto s = retention({{kSched, "0.5"}});
  CHECK_EQ(retain_chained(s, 0.0f, chain), 1);
  CHECK_EQ(run_nonchained(s, 0.0f, 4, &calls, &toks, &ps), 1);
  CHECK_EQ(calls, 2);     // the failing candidate was drafted ...
  CHECK_EQ(toks[1], -1);  // ... but not written
  CHECK_EQ(ps[1], -1.0f);
  // Everything passes: max_steps bounds both paths.
  CHECK_EQ(run_nonchained(RetentionSettings{}, 0.1f, 3, &calls, &toks, &ps), 3);
  CHECK_EQ(calls, 3);
  CHECK_EQ(retain_chained(RetentionSettings{}, 0.1f, chain), 4);
}

TEST(randomized_against_reference) {
  // Reference straight from the text, for random settings and chains.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  int checked = 0;
  for (int t = 0; t < 20000; ++t) {
    RetentionSettings s;
    const int mode = t % 4;  // 0 off, 1 schedule, 2 gate, 3 both
    if (mode == 1 || mode == 3) {
      s.schedule.size = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < s.schedule.size; ++i) s.schedule.values[static_cast<size_t>(i)] = u(rng) * 0.6f;
    }
    if (mode >= 2) s.min_cum_p = (rng() % 3 == 0) ? 0.0 : static_cast<double>(u(rng)) * 0.3;
    s.policy_on = mode != 0;
    const float min_p = u(rng) * 0.5f;
    std::vector<float> probs(1 + rng() % 8);
    for (auto& p : probs) {
      p = u(rng);
      if (rng() % 50 == 0) p = std::numeric_limits<float>::quiet_NaN();
      if (rng() % 50 == 0) p = 1.25f;
    }
    // reference
    int ref = 0;
    double prod = 1.0;
    for (size_t j = 0; j < probs.size(); ++j) {
      const float p = probs[j];
      const float floor =
          s.schedule.size ? s.schedule.values[std::min<size_t>(j, static_cast<size_t>(s.schedule.size - 1))] : min_p;
      bool ok;
      if (!s.policy_on) {
        ok = !(p < floor);
      } else {
        const bool sane = std::isfinite(p) && p >= 0.0f && p <= 1.0f;
        prod *= sane ? static_cast<double>(p) : 0.0;
        ok = sane && p >= floor && (s.min_cum_p == 0.0 || prod >= s.min_cum_p);
      }
      if (!ok) break;
      ++ref;
    }
    const int chained = retain_chained(s, min_p, probs);
    CHECK_EQ(chained, ref);
    std::vector<int32_t> toks(probs.size());
    std::vector<float> ps(probs.size());
    const int nc = draft_nonchained(
        s, min_p, static_cast<int>(probs.size()),
        [&](int step) { return std::pair<int32_t, float>(step, probs[static_cast<size_t>(step)]); },
        std::span<int32_t>(toks), std::span<float>(ps));
    const int want = s.policy_on ? ref : std::min(ref + 1, static_cast<int>(probs.size()));
    CHECK_EQ(nc, want);
    ++checked;
  }
  CHECK_EQ(checked, 20000);
}

TEST(other_settings) {
  auto r = parse_settings({});
  CHECK(r.diagnostics.empty());
  CHECK_EQ(r.settings.mtp.sink, 64);
  CHECK_EQ(r.settings.mtp.window, 256);
  CHECK(r.settings.spec_sample == strata::sampling::SpecSample::Exact);
  CHECK_EQ(r.settings.moce.params().resident_bonus, 1.0f);
  r = parse_settings({{"STRATA_METAL_MTP_SINK", "0"}, {"STRATA_METAL_MTP_WIN", "2051"}});
  CHECK(r.diagnostics.empty());
  CHECK_EQ(r.settings.mtp.sink, 0);
  CHECK_EQ(r.settings.mtp.window, 2051);
  r = parse_settings({{"STRATA_METAL_MTP_SINK", "1024"}});
  CHECK_EQ(r.settings.mtp.sink, 1024);
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"STRATA_METAL_MTP_SINK", "1025"},
                                                                             {"STRATA_METAL_MTP_SINK", "-1"},
                                                                             {"STRATA_METAL_MTP_SINK", "6.4"},
                                                                             {"STRATA_METAL_MTP_WIN", "0"},
                                                                             {"STRATA_METAL_MTP_WIN", "2052"},
                                                                             {"STRATA_METAL_MTP_WIN", ""}}) {
    r = parse_settings(
        {{k, v}, {"STRATA_METAL_MTP_SINK" == k ? "STRATA_METAL_MTP_WIN" : "STRATA_METAL_MTP_SINK", "128"}});
    CHECK_MSG(r.diagnostics.size() == 1, k + "=" + v);
    CHECK_EQ(r.settings.mtp.sink, 64);  // the group falls back as a whole
    CHECK_EQ(r.settings.mtp.window, 256);
  }
  r = parse_settings({{"STRATA_SPEC_SAMPLE", " Greedy "}});
  CHECK(r.settings.spec_sample == strata::sampling::SpecSample::Greedy);
  r = parse_settings({{"STRATA_SPEC_SAMPLE", "greedyish"}});
  CHECK_EQ(r.diagnostics.size(), size_t(1));
  CHECK(r.settings.spec_sample == strata::sampling::SpecSample::Exact);
  r = parse_settings({{"STRATA_MOCE_BONUS", "0.85"},
                      {"STRATA_MOCE_RANK1", "2"},
                      {"STRATA_MOCE_PROTECT", "3"},
                      {"STRATA_MOCE_DRAFT", "on"}});
  CHECK(r.diagnostics.empty());
  auto p = r.settings.moce.params();
  CHECK_NEAR(p.resident_bonus, std::exp(0.85), 1e-6);
  CHECK_EQ(p.rank1_scale, 2.0f);
  CHECK_EQ(p.protect, 3);
  CHECK(p.draft);
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"STRATA_MOCE_BONUS", "9"},
                                                                             {"STRATA_MOCE_BONUS", "nan"},
                                                                             {"STRATA_MOCE_RANK1", "0"},
                                                                             {"STRATA_MOCE_RANK1", "2000"},
                                                                             {"STRATA_MOCE_PROTECT", "65"},
                                                                             {"STRATA_MOCE_DRAFT", "maybe"}}) {
    r = parse_settings(
        {{k, v},
         {"STRATA_MOCE_DRAFT" == k ? "STRATA_MOCE_BONUS" : "STRATA_MOCE_DRAFT", "STRATA_MOCE_DRAFT" == k ? "1" : "1"}});
    CHECK_MSG(r.diagnostics.size() == 1, k + "=" + v);
    CHECK(!r.settings.moce.draft);  // the whole MOCE group fell back
    CHECK_EQ(r.settings.moce.params().resident_bonus, 1.0f);
  }
  // Strict loading names every rejected group.
  try {
    load_settings_strict({{"STRATA_MOCE_PROTECT", "x"}, {kSched, "2"}});
    CHECK(false);
  } catch (const strata::Error& e) {
    CHECK(e.kind() == strata::ErrorKind::Config);
    CHECK(std::string(e.what()).find("STRATA_MOCE_PROTECT") != std::string::npos);
    CHECK(std::string(e.what()).find(kSched) != std::string::npos);
  }
  CHECK(known_settings().size() >= 9);
}

TEST(environ_map_reads_only_strata_variables) {
  setenv("STRATA_METAL_MTP_WIN", "300", 1);
  setenv("NOT_STRATA_X", "1", 1);
  const auto env = environ_map();
  CHECK(env.count("STRATA_METAL_MTP_WIN") == 1);
  CHECK(env.count("NOT_STRATA_X") == 0);
  CHECK_EQ(parse_settings(env).settings.mtp.window, 300);
  unsetenv("STRATA_METAL_MTP_WIN");
}
