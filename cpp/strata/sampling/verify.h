#pragma once
// Verification of a speculative window (SPEC §2.8, R-12). The window ran k+1 rows: row 0's input is
// the last committed token, rows 1..k's inputs are the drafts; row i's logits predict the token after
// history ++ drafts[0..i).
//  - temperature 0: greedy — keep drafts while each equals its row's argmax; the next token is the
//    argmax of the first row that disagrees (or of row k). Draws nothing from the rng.
//  - temperature > 0, SpecSample::Exact: speculative sampling with deterministic drafts (Leviathan et
//    al. 2023 §2.3): p_i = sample_dist(row i, history ++ drafts[0..i)); draft i is accepted with
//    probability p_i(draft); on rejection the next token is drawn from p_i with the draft removed;
//    a fully accepted window draws the next token from p_k. One uniform per examined draft plus one.
//  - temperature > 0, SpecSample::Greedy: the legacy greedy-match rule — keep drafts while each equals
//    its row's argmax, then draw the next token from the stop row's p_i (penalties over every token
//    before it: the history fix). Not distribution-preserving; kept for comparison.
// EOS is an ordinary token here; the caller stops at the first EOS among drafts[0..accepted) ++ next.
#include <cstdint>
#include <span>

#include "strata/sampling/policy.h"
#include "strata/sampling/rng.h"
#include "strata/sampling/sample_dist.h"

namespace strata::sampling {

struct VerifyResult {
  int accepted = 0;         // drafts kept: drafts[0..accepted)
  int32_t next_token = -1;  // the token sampled after them
};

// logits: (drafts.size() + 1) rows × V, row-major. history: every committed token, ending with the
// window's first input. Throws Value on bad sizes or ids (see sample_dist).
VerifyResult verify_window(const float* logits, int V, std::span<const int32_t> drafts, const SamplingPolicy& policy,
                           SpecSample mode, std::span<const int32_t> history, Rng& rng, SampleWorkspace& ws);

}  // namespace strata::sampling
