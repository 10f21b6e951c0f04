#pragma once
// Python glue shared by every engine::DecodeTarget binding (the CPU Engine and the MetalEngine):
// `eval` (argument checks, logits arrays) and one speculative round (draft/speculator.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/draft/speculator.h"
#include "strata/engine/decode_target.h"
#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"

namespace strata::bindings {

// "exact" / "greedy" (STRATA_SPEC_SAMPLE's values); Value error otherwise.
sampling::SpecSample spec_mode(const std::string& s);

// Engine.eval: tokens at start_pos (None = n_past); logits "last" (V floats), "all" (n x V) or "none"
// (returns None); rows >= draft_from_row are draft rows. Locks `mu` and releases the GIL while it runs.
pybind11::object eval_target(engine::DecodeTarget& target, std::mutex& mu,
                             const pybind11::array_t<int64_t, pybind11::array::c_style | pybind11::array::forcecast>& tokens,
                             std::optional<int64_t> start_pos, const std::string& logits,
                             std::optional<int64_t> draft_from_row);

// final_streams: the [n][d] streams `s` of position `pos` (nullptr: not held -> Value error).
pybind11::array_t<float> held_streams(const float* s, int64_t pos, int64_t n, int64_t d);
// mtp_draft's argument checks (a drafter, the token in the vocabulary, 1..256 steps).
void check_draft_args(const engine::DecodeTarget& target, int64_t next_token, int n_steps);
// The drafter's restricted vocabulary as an int32 array.
pybind11::array_t<int32_t> draft_vocab_array(const engine::DecodeTarget& target);

// The speculator of one engine, rebuilt when a round asks for more drafts than it holds.
struct SpecState {
  std::unique_ptr<draft::Speculator> spec;
  std::map<std::string, std::string> retention_env;  // the env the settings below were parsed from
  config::RetentionSettings retention;
};

// (tokens, drafted, verified, accepted, draft_probs): tokens to commit (accepted drafts then the
// next token); draft_probs of the drafted steps. Locks `mu` and releases the GIL while it runs.
pybind11::tuple spec_round(engine::DecodeTarget& target, SpecState& state, std::mutex& mu, int32_t token,
                           const std::vector<int32_t>& history, int max_drafts, bool chained,
                           const std::map<std::string, std::string>& retention_env,
                           const sampling::SamplingPolicy& policy, const std::string& mode, sampling::Rng& rng,
                           bool adaptive = false);
// Adaptive speculation's estimates (draft/adaptive.h) as a dict; None before any round.
pybind11::object spec_adaptive_stats(const SpecState& state, std::mutex& mu);

// Adds `spec_round` to a pybind11 class whose C++ type T has `DecodeTarget& target()`, `SpecState&
// spec_state()` and `std::mutex& mutex()`.
template <class Class>
void def_spec_round(Class& cls) {
  using T = typename Class::type;
  namespace py = pybind11;
  cls.def(
      "spec_round",
      [](T& self, int32_t token, const std::vector<int32_t>& history, int max_drafts, bool chained,
         const std::map<std::string, std::string>& retention_env, const sampling::SamplingPolicy& policy,
         const std::string& mode, sampling::Rng& rng, bool adaptive) {
        return spec_round(self.target(), self.spec_state(), self.mutex(), token, history, max_drafts, chained,
                          retention_env, policy, mode, rng, adaptive);
      },
      py::arg("token"), py::arg("history"), py::arg("max_drafts"), py::arg("chained") = true,
      py::arg("retention_env") = std::map<std::string, std::string>{}, py::arg("policy"), py::arg("mode") = "exact",
      py::arg("rng"), py::arg("adaptive") = false,
      "One speculative round for the pending token at position n_past (draft, retain, verify as one "
      "window, roll back the rejected cells); a plain step when no draft is kept. history: the tokens "
      "the penalties look at, ending with `token` ([] when they are off). Returns (tokens, drafted, "
      "verified, accepted, draft_probs). adaptive: verify only as many of max_drafts drafts as the "
      "measured costs and acceptance say pay (0 = a plain step; docs/drafting.md).");
  cls.def(
      "spec_adaptive_stats", [](T& self) { return spec_adaptive_stats(self.spec_state(), self.mutex()); },
      "Adaptive speculation's state: chosen draft counts, measured window and draft-step seconds, per-step "
      "acceptance, estimated and measured gain over plain decoding; None before the first round.");
}

}  // namespace strata::bindings
