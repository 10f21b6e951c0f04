#include "bindings/spec_round.h"

#include <pybind11/stl.h>

#include "strata/config/settings.h"
#include "strata/util/error.h"

namespace py = pybind11;

namespace strata::bindings {

pybind11::tuple spec_round(engine::DecodeTarget& target, SpecState& state, std::mutex& mu, int32_t token,
                           const std::vector<int32_t>& history, int max_drafts, bool chained,
                           const std::map<std::string, std::string>& retention_env,
                           const sampling::SamplingPolicy& policy, const std::string& mode, sampling::Rng& rng) {
  sampling::validate(policy);
  if (token < 0 || token >= target.n_vocab())
    throw_error(ErrorKind::Value, "spec_round: token " + std::to_string(token) + " is outside the vocabulary");
  for (const int32_t h : history)
    if (h < 0 || h >= target.n_vocab())
      throw_error(ErrorKind::Value, "spec_round: history token " + std::to_string(h) + " is outside the vocabulary");
  if (max_drafts < 0 || max_drafts > draft::kMaxDraftSteps)
    throw_error(ErrorKind::Value, "spec_round: max_drafts must be in [0, " + std::to_string(draft::kMaxDraftSteps) + "]");
  if (max_drafts > 0 && !target.has_drafter())
    throw_error(ErrorKind::Value, "spec_round: this model has no MTP layer to draft with (use max_drafts=0)");
  draft::RoundOptions opt;
  opt.max_drafts = max_drafts;
  opt.chained = chained;
  opt.policy = policy;
  opt.caller_min_p = policy.min_p;
  if (mode == "exact")
    opt.mode = sampling::SpecSample::Exact;
  else if (mode == "greedy")
    opt.mode = sampling::SpecSample::Greedy;
  else
    throw_error(ErrorKind::Value, "spec_round: mode must be 'exact' or 'greedy', not '" + mode + "'");
  draft::RoundResult r;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mu);
    if (!state.spec || (max_drafts > 0 && state.spec->max_drafts() < max_drafts))
      state.spec = std::make_unique<draft::Speculator>(target, std::max(max_drafts, 1));
    if (state.retention_env != retention_env) {  // parsed once per distinct setting, not per round
      state.retention = config::load_settings_strict(retention_env).retention;
      state.retention_env = retention_env;
    }
    opt.retention = state.retention;
    r = state.spec->round(token, history, opt, rng);
  }
  py::list toks, probs;
  for (int i = 0; i < r.n_tokens; ++i) toks.append(r.tokens[i]);
  for (int i = 0; i < r.drafted; ++i) probs.append(r.probs[i]);
  return py::make_tuple(toks, r.drafted, r.verified, r.accepted, probs);
}

}  // namespace strata::bindings
