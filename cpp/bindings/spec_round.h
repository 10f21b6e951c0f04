#pragma once
// Python glue of the Engine binding over an engine::Sequence: `eval` (argument checks, logits
// arrays), the drafter's argument checks and one speculative round (draft/speculator.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "strata/config/settings.h"
#include "strata/draft/speculator.h"
#include "strata/engine/sequence.h"
#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"

namespace strata::bindings {

// "exact" / "greedy" (STRATA_SPEC_SAMPLE's values); Value error otherwise.
sampling::SpecSample spec_mode(const std::string& s);

// Engine.eval: tokens at start_pos (None = n_past); logits "last" (V floats), "all" (n x V) or "none"
// (returns None); rows >= draft_from_row are draft rows; cut_from_row (logits "all" only): an exact window
// cut from that row on (DecodeTarget::eval_window), the logits then [rows run][V]. Locks `mu` and releases
// the GIL while it runs.
pybind11::object eval_target(
    engine::Sequence& target, std::mutex& mu,
    const pybind11::array_t<int64_t, pybind11::array::c_style | pybind11::array::forcecast>& tokens,
    std::optional<int64_t> start_pos, const std::string& logits, std::optional<int64_t> draft_from_row,
    std::optional<int64_t> cut_from_row = std::nullopt);

// final_streams: the [n][d] streams `s` of position `pos` (nullptr: not held -> Value error).
pybind11::array_t<float> held_streams(const float* s, int64_t pos, int64_t n, int64_t d);
// mtp_draft's argument checks (a drafter, the token in the vocabulary, 1..256 steps).
void check_draft_args(const engine::Sequence& target, int64_t next_token, int n_steps);
// The drafter's restricted vocabulary as an int32 array.
pybind11::array_t<int32_t> draft_vocab_array(const engine::Sequence& target);

// The speculator of one engine, rebuilt when a round asks for more drafts than it holds, and the
// engine's decode settings (given once, when the engine is made).
struct SpecState {
  std::unique_ptr<draft::Speculator> spec;
  std::optional<draft::AdaptiveStats> seed;  // an earlier run's costs for the speculator made next
  config::RetentionSettings retention;
  sampling::SpecSample mode = sampling::SpecSample::Exact;
  float window_cut = 0.0f;  // STRATA_MOCE_WINDOW_CUT (draft::RoundOptions::window_cut)
  int64_t cut_drafts = 0;   // drafts window cuts dropped, since the engine was made
};

// (tokens, drafted, verified, accepted, draft_probs): tokens to commit (accepted drafts then the
// next token); draft_probs of the drafted steps. Locks `mu` and releases the GIL while it runs.
pybind11::tuple spec_round(engine::Sequence& target, SpecState& state, std::mutex& mu, int32_t token,
                           const std::vector<int32_t>& history, int max_drafts, bool chained,
                           const sampling::SamplingPolicy& policy, sampling::Rng& rng, bool adaptive = false);
// Adaptive speculation's estimates (draft/adaptive.h) as a dict; None before any round.
pybind11::object spec_adaptive_stats(const SpecState& state, std::mutex& mu);
// Seeds the speculator's costs from such a dict (verify_seconds, draft_step_seconds, plain_seconds):
// applied when the speculator is made, so only before the first round.
void spec_adaptive_seed(SpecState& state, std::mutex& mu, const pybind11::dict& stats);

// Adds `spec_round` to a pybind11 class whose C++ type T has `engine::Sequence& seq()`, `SpecState&
// spec_state()` and `std::mutex& mutex()`. The retention settings and the verification rule are the
// engine's (SpecState), not a round's.
template <class Class>
void def_spec_round(Class& cls) {
  using T = typename Class::type;
  namespace py = pybind11;
  cls.def(
      "spec_round",
      [](T& self, int32_t token, const std::vector<int32_t>& history, int max_drafts, bool chained,
         const sampling::SamplingPolicy& policy, sampling::Rng& rng, bool adaptive) {
        return spec_round(self.seq(), self.spec_state(), self.mutex(), token, history, max_drafts, chained, policy, rng,
                          adaptive);
      },
      py::arg("token"), py::arg("history"), py::arg("max_drafts"), py::arg("chained") = true, py::kw_only(),
      py::arg("policy"), py::arg("rng"), py::arg("adaptive") = false,
      "One speculative round for the pending token at position n_past (draft, retain, verify as one "
      "window, roll back the rejected cells) under the engine's retention settings and verification rule; a "
      "plain step when no draft is kept. history: the tokens "
      "the penalties look at, ending with `token` ([] when they are off). Returns (tokens, drafted, "
      "verified, accepted, draft_probs). policy, rng and adaptive are keyword arguments. adaptive: verify only "
      "as many of max_drafts drafts as the measured costs and acceptance say pay (0 = a plain step; "
      "docs/drafting.md).");
  cls.def(
      "spec_adaptive_seed",
      [](T& self, const py::dict& stats) { spec_adaptive_seed(self.spec_state(), self.mutex(), stats); },
      py::arg("stats"),
      "Before the first round: start adaptive speculation from the costs of an earlier run on the same model and "
      "settings (a spec_adaptive_stats() dict: verify_seconds, draft_step_seconds, plain_seconds). When they say "
      "drafting cannot pay, the probe's rounds are plain steps (docs/drafting.md).");
  cls.def(
      "spec_adaptive_stats", [](T& self) { return spec_adaptive_stats(self.spec_state(), self.mutex()); },
      "Adaptive speculation's state: chosen draft counts, measured window and draft-step seconds, per-step "
      "acceptance, estimated and measured gain over plain decoding; None before the first round.");
  cls.def(
      "spec_window_cuts",
      [](T& self) {
        std::lock_guard<std::mutex> lock(self.mutex());
        return self.spec_state().cut_drafts;
      },
      "Drafts that exact window cuts (STRATA_MOCE_WINDOW_CUT) dropped before verification, since the engine was "
      "made.");
}

}  // namespace strata::bindings
