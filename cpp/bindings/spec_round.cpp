#include "bindings/spec_round.h"

#include <pybind11/stl.h>

#include <cstring>
#include <string>

#include "strata/config/settings.h"
#include "strata/util/error.h"

namespace py = pybind11;

namespace strata::bindings {

sampling::SpecSample spec_mode(const std::string& s) {
  if (s == "exact") return sampling::SpecSample::Exact;
  if (s == "greedy") return sampling::SpecSample::Greedy;
  throw_error(ErrorKind::Value, "mode must be \"exact\" or \"greedy\", got \"" + s + "\"");
}

pybind11::array_t<float> held_streams(const float* s, int64_t pos, int64_t n, int64_t d) {
  if (!s)
    throw_error(ErrorKind::Value,
                "final_streams: position " + std::to_string(pos) + " is not held (only the rows of the last eval are)");
  py::array_t<float> out(std::vector<py::ssize_t>{n, d});
  std::memcpy(out.mutable_data(), s, static_cast<std::size_t>(n * d) * sizeof(float));
  return out;
}

void check_draft_args(const engine::Sequence& target, int64_t next_token, int n_steps) {
  if (!target.has_drafter()) throw_error(ErrorKind::Value, "this model has no MTP layer (nextn_predict_layers = 0)");
  if (next_token < 0 || next_token >= target.n_vocab())
    throw_error(ErrorKind::Value, "mtp_draft: next_token " + std::to_string(next_token) + " is outside the vocabulary");
  if (n_steps < 1 || n_steps > 256) throw_error(ErrorKind::Value, "mtp_draft: n_steps must be in [1, 256]");
}

pybind11::array_t<int32_t> draft_vocab_array(const engine::Sequence& target) {
  if (!target.has_drafter()) throw_error(ErrorKind::Value, "this model has no MTP layer");
  const int64_t Vr = target.draft_vocab();
  py::array_t<int32_t> out(std::vector<py::ssize_t>{Vr});
  std::memcpy(out.mutable_data(), target.draft_vocab_ids(), static_cast<std::size_t>(Vr) * sizeof(int32_t));
  return out;
}

pybind11::object eval_target(
    engine::Sequence& target, std::mutex& mu,
    const pybind11::array_t<int64_t, pybind11::array::c_style | pybind11::array::forcecast>& tokens,
    std::optional<int64_t> start_pos, const std::string& logits, std::optional<int64_t> draft_from_row,
    std::optional<int64_t> cut_from_row) {
  using engine::LogitRows;
  LogitRows which;
  if (logits == "last")
    which = LogitRows::Last;
  else if (logits == "all")
    which = LogitRows::All;
  else if (logits == "none")
    which = LogitRows::None;
  else
    throw_error(ErrorKind::Value, "eval: logits must be 'last', 'all' or 'none', not '" + logits + "'");
  if (tokens.ndim() != 1) throw_error(ErrorKind::Value, "eval: tokens must be a 1-D sequence of token ids");
  const int64_t n = tokens.shape(0);
  if (n < 1) throw_error(ErrorKind::Value, "eval: no tokens");
  if (draft_from_row && *draft_from_row < 0)
    throw_error(ErrorKind::Value,
                "eval: draft_from_row must be >= 0 (None = no draft rows), not " + std::to_string(*draft_from_row));
  if (cut_from_row && (*cut_from_row < 1 || which != LogitRows::All))
    throw_error(ErrorKind::Value, "eval: cut_from_row must be >= 1 and needs logits='all', got " +
                                      std::to_string(*cut_from_row) + " with logits='" + logits + "'");
  const int64_t V = target.n_vocab();
  std::vector<int32_t> ids(static_cast<std::size_t>(n));
  const int64_t* src = tokens.data();
  for (int64_t i = 0; i < n; ++i) {
    if (src[i] < 0 || src[i] >= V)
      throw_error(ErrorKind::Value, "eval: token " + std::to_string(src[i]) + " at index " + std::to_string(i) +
                                        " is outside the vocabulary of " + std::to_string(V));
    ids[static_cast<std::size_t>(i)] = static_cast<int32_t>(src[i]);
  }
  py::array_t<float> out;
  float* dst = nullptr;
  if (which == LogitRows::Last) {
    out = py::array_t<float>(std::vector<py::ssize_t>{V});
    dst = out.mutable_data();
  } else if (which == LogitRows::All) {
    out = py::array_t<float>(std::vector<py::ssize_t>{n, V});
    dst = out.mutable_data();
  }
  int64_t ran = n;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    const int64_t start = start_pos ? *start_pos : target.n_past();
    if (cut_from_row)
      ran = target.eval_window(ids.data(), n, start, dst, draft_from_row ? *draft_from_row : -1, *cut_from_row);
    else
      target.eval(ids.data(), n, start, which, dst, draft_from_row ? *draft_from_row : -1);
  }
  if (which == LogitRows::None) return py::none();
  if (ran < n) return out[py::slice(0, ran, 1)];
  return out;
}

pybind11::tuple spec_round(engine::Sequence& target, SpecState& state, std::mutex& mu, int32_t token,
                           const std::vector<int32_t>& history, int max_drafts, bool chained,
                           const sampling::SamplingPolicy& policy, sampling::Rng& rng, bool adaptive) {
  sampling::validate(policy);
  if (token < 0 || token >= target.n_vocab())
    throw_error(ErrorKind::Value, "spec_round: token " + std::to_string(token) + " is outside the vocabulary");
  for (const int32_t h : history)
    if (h < 0 || h >= target.n_vocab())
      throw_error(ErrorKind::Value, "spec_round: history token " + std::to_string(h) + " is outside the vocabulary");
  if (max_drafts < 0 || max_drafts > draft::kMaxDraftSteps)
    throw_error(ErrorKind::Value,
                "spec_round: max_drafts must be in [0, " + std::to_string(draft::kMaxDraftSteps) + "]");
  if (max_drafts > 0 && !target.has_drafter())
    throw_error(ErrorKind::Value, "spec_round: this model has no MTP layer to draft with (use max_drafts=0)");
  draft::RoundOptions opt;
  opt.max_drafts = max_drafts;
  opt.chained = chained;
  opt.policy = policy;
  opt.caller_min_p = policy.min_p;
  opt.mode = state.mode;
  opt.retention = state.retention;
  opt.adaptive = adaptive;
  opt.window_cut = state.window_cut;
  draft::RoundResult r;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    if (!state.spec || (max_drafts > 0 && state.spec->max_drafts() < max_drafts)) {
      state.spec = std::make_unique<draft::Speculator>(target, std::max(max_drafts, 1));
      if (state.seed) state.spec->seed_adaptive(*state.seed);
    }
    r = state.spec->round(token, history, opt, rng);
    state.cut_drafts += r.cut;
  }
  py::list toks, probs;
  for (int i = 0; i < r.n_tokens; ++i) toks.append(r.tokens[i]);
  for (int i = 0; i < r.drafted; ++i) probs.append(r.probs[i]);
  return py::make_tuple(toks, r.drafted, r.verified, r.accepted, probs);
}

pybind11::object spec_adaptive_stats(const SpecState& state, std::mutex& mu) {
  namespace py = pybind11;
  draft::AdaptiveStats a;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!state.spec) return py::none();
    a = state.spec->adaptive().stats();
  }
  py::list chosen, verify_s, verify_n, accept;
  for (int n = 0; n <= a.max_drafts; ++n) chosen.append(a.chosen[static_cast<std::size_t>(n)]);
  for (int m = 1; m <= a.max_drafts + 1; ++m) {
    verify_s.append(a.verify_s[static_cast<std::size_t>(m)]);
    verify_n.append(a.verify_samples[static_cast<std::size_t>(m)]);
  }
  for (int j = 0; j < a.max_drafts; ++j) accept.append(a.accept[static_cast<std::size_t>(j)]);
  py::dict d;
  d["max_drafts"] = a.max_drafts;
  d["rounds"] = a.rounds;
  d["chosen"] = chosen;
  d["verify_seconds"] = verify_s;
  d["draft_step_seconds"] = a.draft_step_s;
  d["plain_seconds"] = a.plain_s;
  d["round_overhead_seconds"] = a.overhead_s;  // per round, outside the timed parts (the caller's share)
  d["acceptance"] = accept;
  d["estimated_gain"] = a.estimated_gain;
  d["measured_gain"] = a.measured_gain;
  d["seeded"] = a.seeded;
  d["guarded"] = a.guarded;                // regular rounds the realized-gain guard ran as plain steps
  d["peak"] = a.peak;                      // mean peak probability of recent plain steps' distributions (0 = none)
  d["peak_held"] = a.peak_held;            // rounds in which it held a due exploring round back
  d["peak_triggered"] = a.peak_triggered;  // exploring rounds the recent peaks brought forward (greedy)
  // Samples this session measured (seeds not counted): 0 = that cost is only the seed's.
  d["verify_samples"] = verify_n;
  d["draft_step_samples"] = a.draft_samples;
  d["plain_samples"] = a.plain_samples;
  // Judged and accepted drafts per step in the verification context accept_key (0 greedy, else the
  // temperature; -1 none yet), not decayed: what the cost cache pools into acceptance priors.
  py::list judged, accepted, prior;
  for (int j = 0; j < a.max_drafts; ++j) {
    judged.append(a.judged[static_cast<std::size_t>(j)]);
    accepted.append(a.accepted[static_cast<std::size_t>(j)]);
    prior.append(a.accept_prior[static_cast<std::size_t>(j)]);
  }
  d["acceptance_prior"] = prior;  // the seeded rate in force per step (-1: the default prior, one half)
  d["accept_key"] = a.accept_key;
  d["judged"] = judged;
  d["accepted"] = accepted;
  return d;
}

void spec_adaptive_seed(SpecState& state, std::mutex& mu, const pybind11::dict& stats) {
  namespace py = pybind11;
  draft::AdaptiveStats a;
  auto seconds = [](const py::handle& v, const char* what) {
    const double x = v.cast<double>();
    if (!(x >= 0.0 && x < 3600.0))
      throw_error(ErrorKind::Value, std::string("spec_adaptive_seed: ") + what + " must be in [0, 3600) seconds");
    return x;
  };
  const py::list verify = stats["verify_seconds"].cast<py::list>();
  if (py::len(verify) > static_cast<std::size_t>(draft::kAdaptiveMaxDrafts) + 1)
    throw_error(ErrorKind::Value, "spec_adaptive_seed: more verify_seconds than window sizes");
  a.max_drafts = static_cast<int>(py::len(verify)) - 1;
  for (std::size_t m = 1; m <= py::len(verify); ++m) a.verify_s[m] = seconds(verify[m - 1], "verify_seconds");
  a.draft_step_s = seconds(stats["draft_step_seconds"], "draft_step_seconds");
  a.plain_s = seconds(stats["plain_seconds"], "plain_seconds");
  // Optional: [{"key": context, "accept": [rate or -1 per step]}, ...] (draft/adaptive.h, "Acceptance prior").
  if (stats.contains("acceptance_priors")) {
    auto bad = [](const std::string& why) { throw_error(ErrorKind::Value, "spec_adaptive_seed: " + why); };
    auto number = [&](const py::handle& v, const char* what) {
      if (py::isinstance<py::bool_>(v) || !(py::isinstance<py::float_>(v) || py::isinstance<py::int_>(v)))
        bad(std::string(what) + " must be a number");
      return v.cast<double>();
    };
    const py::handle priors = stats["acceptance_priors"];
    if (!py::isinstance<py::list>(priors)) bad("acceptance_priors must be a list");
    const py::list list = priors.cast<py::list>();
    if (py::len(list) > static_cast<std::size_t>(draft::kMaxAcceptPriors))
      bad("at most " + std::to_string(draft::kMaxAcceptPriors) + " acceptance_priors");
    std::size_t i = 0;
    for (const py::handle h : list) {
      if (!py::isinstance<py::dict>(h)) bad("each acceptance prior must be a dict with 'key' and 'accept'");
      const py::dict p = h.cast<py::dict>();
      if (!p.contains("key") || !p.contains("accept")) bad("each acceptance prior needs 'key' and 'accept'");
      const double key = number(p["key"], "a prior's key");
      if (!(key >= 0.0 && key < 1e6)) bad("a prior's key (a temperature, 0 = greedy) must be in [0, 1e6)");
      if (!py::isinstance<py::list>(p["accept"])) bad("a prior's accept must be a list");
      const py::list acc = p["accept"].cast<py::list>();
      if (py::len(acc) > static_cast<std::size_t>(draft::kAdaptiveMaxDrafts)) bad("a prior has more steps than drafts");
      draft::AcceptPrior& out = a.accept_priors[i++];
      out.key = key;
      out.accept.fill(-1.0);
      for (std::size_t j = 0; j < py::len(acc); ++j) {
        const double x = number(acc[j], "a prior's acceptance");
        if (!(x == -1.0 || (x >= 0.0 && x <= 1.0))) bad("a prior's acceptance must be in [0, 1] (or -1: none)");
        out.accept[j] = x;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  if (state.spec) throw_error(ErrorKind::Value, "spec_adaptive_seed: the engine has run speculative rounds already");
  state.seed = a;
}

}  // namespace strata::bindings
