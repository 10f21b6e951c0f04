#include "strata/sampling/sample_dist.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "strata/engine/vec_dot.h"
#include "strata/util/error.h"

namespace strata::sampling {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// A logit that is NaN or +inf is an error wherever it stands (-inf is a mask).
void check_logit(int i, float x) {
  if (!(x < std::numeric_limits<float>::infinity()))
    throw_error(ErrorKind::Value, "sample_dist: logit " + std::to_string(i) + " is " + std::to_string(x));
}

// Sums over a working set, in kSumLanes chains by token id (id mod 8), each chain in ascending id order, the
// chains then added in a fixed tree. The full path (position = id) and the compact one (candidates, ascending
// ids) add the same nonzero terms in the same order, so their sums stay bitwise equal (zeros change nothing),
// and the full path's V-sized sums run as eight independent chains: one serial double chain was ~4 cycles a
// token (~15 us at V = 8192, ~0.3 ms at 151936, twice a sampled token). term(j): position j's value (it may
// also store it). Position j is token ids[j], or base + j without ids (base a multiple of kSumLanes).
constexpr int kSumLanes = 8;
template <class Term>
double lane_sum(int n, const int32_t* ids, Term term) {
  double acc[kSumLanes] = {};
  if (ids == nullptr) {
    int i = 0;
    for (; i + kSumLanes <= n; i += kSumLanes)
      for (int l = 0; l < kSumLanes; ++l) acc[l] += term(i + l);
    for (; i < n; ++i) acc[i % kSumLanes] += term(i);
  } else {
    for (int j = 0; j < n; ++j) acc[ids[j] % kSumLanes] += term(j);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Σ x over the working set, the token `exclude` left out (-1: none).
template <class T>
double id_lane_sum(const T* x, int n, const int32_t* ids, int32_t exclude = -1, int32_t base = 0) {
  if (ids != nullptr)
    return lane_sum(n, ids, [&](int j) { return ids[j] == exclude ? 0.0 : static_cast<double>(x[j]); });
  return lane_sum(n, nullptr, [&](int i) { return base + i == exclude ? 0.0 : static_cast<double>(x[i]); });
}

// The vocabulary scans below (argmax, top-k) jump with engine::VecKernels::first_above to the next logit
// that can change their result (above the running floor, or NaN / +inf for the error): the same result
// as looking at every logit, without a scalar pass over the vocabulary.
using FirstAbove = int64_t (*)(const float*, int64_t, float);
int next_above(FirstAbove first_above, const float* x, int from, int V, float floor) {
  return from + static_cast<int>(first_above(x + from, V - from, floor));
}

// Total order used wherever a cut is made: larger value first, then lower id.
struct ByValueThenId {
  const double* v;
  bool operator()(int32_t a, int32_t b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

// Keeps the k largest logits (ties to the lowest id), the rest become -inf: nth_element under the
// total order. Only for k > 256: smaller k take the compact path (select_top_k).
void apply_top_k(double* w, int V, int k, SampleWorkspace& ws) {
  if (k <= 0 || k >= V) return;
  auto& idx = ws.order;
  idx.resize(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) idx[static_cast<size_t>(i)] = i;
  std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), ByValueThenId{w});
  for (auto it = idx.begin() + k; it != idx.end(); ++it) w[*it] = kNegInf;
}

// Top-k straight from the float logits (0 < k <= 256), for the compact path of sample_dist: one pass
// with a sorted candidate list and a floor to beat (ids arrive ascending, so a tie never displaces a
// lower id; -inf never enters), then the survivors in ascending id order — ids into
// ws.cand_ids, their logits (in double) into w[0..n). Also the validation of every logit (a NaN or +inf
// anywhere is an error, as on the full path). Returns n (< k when fewer than k logits are finite).
int select_top_k(const float* logits, int V, int k, double* w, SampleWorkspace& ws) {
  auto& idx = ws.order;
  auto& vals = ws.topk_vals;
  idx.clear();
  vals.clear();
  double floor = kNegInf;
  const FirstAbove first_above = engine::vec_kernels().first_above;
  for (int i = 0; i < V; ++i) {
    // floor is a float's value (or -inf), so comparing in float is comparing in double.
    i = next_above(first_above, logits, i, V, static_cast<float>(floor));
    if (i == V) break;
    const float x = logits[i];
    check_logit(i, x);
    const double v = static_cast<double>(x);
    if (!(v > floor)) continue;
    size_t pos = idx.size();
    if (static_cast<int>(pos) == k) {
      --pos;
    } else {
      idx.push_back(0);
      vals.push_back(0.0);
    }
    while (pos > 0 && v > vals[pos - 1]) {
      vals[pos] = vals[pos - 1];
      idx[pos] = idx[pos - 1];
      --pos;
    }
    vals[pos] = v;
    idx[pos] = i;
    if (static_cast<int>(idx.size()) == k) floor = vals.back();
  }
  auto& ids = ws.cand_ids;
  ids.assign(idx.begin(), idx.end());
  std::sort(ids.begin(), ids.end());
  for (size_t j = 0; j < ids.size(); ++j) w[j] = static_cast<double>(logits[ids[j]]);
  return static_cast<int>(ids.size());
}

// ids: the candidates' token ids, ascending (w[j] is token ids[j]'s); empty = all V tokens, w[t] is t's.
void apply_penalties(double* w, int V, std::span<const int32_t> ids, const SamplingPolicy& p,
                     std::span<const int32_t> history, std::span<const int32_t> inputs, SampleWorkspace& ws) {
  for (const int32_t t : penalized_tokens(V, p, history, inputs, ws)) {
    size_t slot = static_cast<size_t>(t);
    if (!ids.empty()) {
      const auto it = std::lower_bound(ids.begin(), ids.end(), t);
      if (it == ids.end() || *it != t) continue;  // outside top-k: stays out
      slot = static_cast<size_t>(it - ids.begin());
    }
    double& x = w[slot];
    if (x == kNegInf) continue;  // outside top-k: stays out
    x = penalized_logit(x, p);
  }
}

// Keeps the smallest prefix (by probability desc, id asc) whose mass reaches top_p · sum; zeroes the
// rest; returns the kept mass. One pass buckets the candidates by the top bits of their float value
// (monotone in e), a walk from the top bucket finds the bucket where the mass crosses the target;
// only that bucket is sorted. Everything in higher buckets is kept whatever its order.
double apply_top_p(double* e, int V, const int32_t* ids, double sum, double top_p, SampleWorkspace& ws) {
  const double target = top_p * sum;
  auto& idx = ws.order;
  idx.clear();
  for (int i = 0; i < V; ++i)
    if (e[i] > 0.0) idx.push_back(i);
  if (idx.size() <= 2048) {  // few candidates: sort them all
    std::sort(idx.begin(), idx.end(), ByValueThenId{e});
    double cum = 0.0;
    size_t keep = 0;
    while (keep < idx.size() && cum < target) cum += e[idx[keep++]];
    for (size_t j = keep; j < idx.size(); ++j) e[idx[j]] = 0.0;
    return id_lane_sum(e, V, ids);  // the kept mass, summed as every other
  }
  constexpr int kShift = 19;  // 8 exponent + 4 mantissa bits: 4096 buckets, 16 per binade
  constexpr int kBuckets = 1 << (31 - kShift);
  auto& mass = ws.bucket_mass;
  mass.assign(kBuckets, 0.0);
  auto bucket_of = [](double v) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<int>(bits >> kShift);  // v in (0, 1]: sign bit clear
  };
  for (int i = 0; i < V; ++i)
    if (e[i] > 0.0) mass[static_cast<size_t>(bucket_of(e[i]))] += e[i];
  double above = 0.0;  // mass of the buckets above the boundary
  int boundary = kBuckets - 1;
  for (; boundary > 0; --boundary) {
    if (above + mass[static_cast<size_t>(boundary)] >= target) break;
    above += mass[static_cast<size_t>(boundary)];
  }
  // Sort the boundary bucket's tokens; keep them until the target is reached.
  idx.clear();
  for (int i = 0; i < V; ++i)
    if (e[i] > 0.0 && bucket_of(e[i]) == boundary) idx.push_back(i);
  std::sort(idx.begin(), idx.end(), ByValueThenId{e});
  double cum = above;
  size_t keep = 0;
  while (keep < idx.size() && cum < target) cum += e[idx[keep++]];
  for (size_t j = keep; j < idx.size(); ++j) e[idx[j]] = 0.0;
  for (int i = 0; i < V; ++i)
    if (e[i] > 0.0 && bucket_of(e[i]) < boundary) e[i] = 0.0;
  return id_lane_sum(e, V, ids);  // the kept mass, summed as every other
}

// The first largest logit's id, -1 when every logit is -inf; NaN / +inf are errors.
int32_t greedy_argmax_or_none(const float* logits, int V) {
  int32_t best = -1;
  float top = -std::numeric_limits<float>::infinity();  // -inf (a mask) never beats it
  const FirstAbove first_above = engine::vec_kernels().first_above;
  for (int i = 0; i < V; ++i) {
    i = next_above(first_above, logits, i, V, top);
    if (i == V) break;
    const float x = logits[i];
    check_logit(i, x);
    if (x > top) {  // strictly: ties stay with the lowest id
      top = x;
      best = i;
    }
  }
  return best;
}

int32_t greedy_argmax(const float* logits, int V) {
  if (V < 1) throw_error(ErrorKind::Value, "sample_dist: vocabulary size must be >= 1");
  const int32_t best = greedy_argmax_or_none(logits, V);
  if (best < 0) throw_error(ErrorKind::Value, "sample_dist: every logit is -inf");
  return best;
}

}  // namespace

SupportDist support_dist(const float* logits, int V, const SamplingPolicy& policy, std::span<const int32_t> history,
                         std::span<const int32_t> inputs, SampleWorkspace& ws) {
  if (V < 1) throw_error(ErrorKind::Value, "sample_dist: vocabulary size must be >= 1");
  ws.work.resize(static_cast<size_t>(V));
  double* w = ws.work.data();
  // The working set: every token (n = V, w[t] is token t), or with 0 < top_k <= 256 only the top-k
  // candidates (n <= k, w[j] is token ids[j], ids ascending). Every stage below runs over it in the same
  // order, skipping only tokens whose value is -inf or 0 there — so both give bitwise the same
  // distribution, the compact one without V-sized passes (at V = 151936 they were ~0.8 ms a row).
  int n = V;
  std::span<const int32_t> ids;
  if (policy.top_k > 0 && policy.top_k < V && policy.top_k <= 256) {
    n = select_top_k(logits, V, policy.top_k, w, ws);
    if (n == 0) throw_error(ErrorKind::Value, "sample_dist: every logit is -inf");  // (empty ids = all V below)
    ids = ws.cand_ids;
  }
  // Every token, as the logits are (no top-k cut, no penalty): the stages read the logits themselves,
  // which in double are what w would hold, and the argmax is the vector scan's (the first largest).
  const bool as_logits = ids.empty() && (policy.top_k <= 0 || policy.top_k >= V) && !penalties_apply(policy);
  if (ids.empty() && !as_logits) {
    // A NaN or +inf anywhere is an error (the vector scan finds the first), then a plain conversion. (With
    // as_logits the argmax's scan below stops at the first of them and raises the same error.)
    const int bad = static_cast<int>(engine::vec_kernels().first_above(logits, V, std::numeric_limits<float>::max()));
    if (bad < V) check_logit(bad, logits[bad]);
    for (int i = 0; i < V; ++i) w[i] = static_cast<double>(logits[i]);
    apply_top_k(w, V, policy.top_k, ws);  // 1. top-k (k > 256 here, or off)
  }
  const auto token = [&](int j) { return ids.empty() ? j : ids[static_cast<size_t>(j)]; };
  // 2. repetition + presence penalties
  if (!as_logits) apply_penalties(w, V, ids, policy, history, inputs, ws);

  int best = -1;
  if (as_logits) {
    best = greedy_argmax_or_none(logits, V);
  } else {
    double top_w = kNegInf;  // -inf never beats it; strictly greater: ties stay with the lowest id
    for (int i = 0; i < n; ++i)
      if (w[i] > top_w) {
        top_w = w[i];
        best = i;
      }
  }
  if (best < 0) throw_error(ErrorKind::Value, "sample_dist: every logit is -inf");
  ws.support.resize(static_cast<size_t>(std::max(n, 1)));
  if (policy.temperature == 0.0f) {
    ws.greedy_token = token(best);
    ws.support[0] = 1.0f;
    ws.peak = 1.0;
    return SupportDist{1, &ws.greedy_token, ws.support.data()};
  }

  // 3. temperature + softmax (unnormalised: the best token has e = 1). The exponentials go through the
  // engine's vectorised exp_f32 (<= 2 ulp, bitwise the same on every ISA; 0 below e^-87, so -inf
  // gives 0): std::exp in double over the vocabulary was ~60 % of this function and a fifth to a third
  // of a decode step on the demo model. Arguments are formed and the sum is taken in double.
  const double inv_t = 1.0 / static_cast<double>(policy.temperature);
  const double top = as_logits ? static_cast<double>(logits[best]) : w[best];
  ws.exps.resize(static_cast<size_t>(n));
  float* f = ws.exps.data();
  if (as_logits)
    for (int i = 0; i < n; ++i) f[i] = static_cast<float>((static_cast<double>(logits[i]) - top) * inv_t);
  else
    for (int i = 0; i < n; ++i) f[i] = static_cast<float>((w[i] - top) * inv_t);  // -inf stays -inf
  engine::vec_kernels().exp(f, f, n);
  const int32_t* id_of = ids.empty() ? nullptr : ids.data();
  // w = the exponentials in double, summed in the same pass.
  double sum = lane_sum(n, id_of, [&](int j) { return w[j] = static_cast<double>(f[j]); });
  // 4. min-p: drop p < min_p · p_max (equality stays); p_max corresponds to e = 1.
  if (policy.min_p > 0.0f) {
    const double floor = static_cast<double>(policy.min_p);
    for (int i = 0; i < n; ++i) w[i] = w[i] < floor ? 0.0 : w[i];
    sum = id_lane_sum(w, n, id_of);
  }
  // 5. top-p over what min-p left (ties by position = by id on both working sets)
  if (policy.top_p < 1.0f) sum = apply_top_p(w, n, id_of, sum, static_cast<double>(policy.top_p), ws);

  const double inv = 1.0 / sum;
  ws.peak = w[best] * inv;  // min-p and top-p always keep the best token (e = 1)
  float* prob = ws.support.data();
  for (int j = 0; j < n; ++j) prob[j] = static_cast<float>(w[j] * inv);
  return SupportDist{n, ids.empty() ? nullptr : ids.data(), prob};
}

void sample_dist(const float* logits, int V, const SamplingPolicy& policy, std::span<const int32_t> history,
                 std::span<const int32_t> inputs, float* out, SampleWorkspace& ws) {
  const SupportDist d = support_dist(logits, V, policy, history, inputs, ws);
  if (!d.ids) {
    std::copy(d.prob, d.prob + d.n, out);
    return;
  }
  std::fill(out, out + V, 0.0f);
  for (int j = 0; j < d.n; ++j) out[d.ids[j]] = d.prob[j];
}

bool penalties_apply(const SamplingPolicy& p) {
  return !((p.repetition_penalty == 1.0 && p.presence_penalty == 0.0) || p.penalty_last_n == 0);
}

std::span<const int32_t> penalized_tokens(int V, const SamplingPolicy& p, std::span<const int32_t> history,
                                          std::span<const int32_t> inputs, SampleWorkspace& ws) {
  ws.penalized.clear();
  if (!penalties_apply(p)) return {};
  if (ws.seen.size() != static_cast<size_t>(V)) {
    ws.seen.assign(static_cast<size_t>(V), 0);
    ws.stamp = 0;
  }
  if (++ws.stamp == 0) {  // wrapped: clear the stamps once every 2^32 calls
    std::fill(ws.seen.begin(), ws.seen.end(), 0);
    ws.stamp = 1;
  }
  const size_t total = history.size() + inputs.size();
  const size_t look = p.penalty_last_n < 0 ? total : std::min(total, static_cast<size_t>(p.penalty_last_n));
  for (size_t j = total - look; j < total; ++j) {
    const int32_t t = j < history.size() ? history[j] : inputs[j - history.size()];
    if (t < 0 || t >= V)
      throw_error(ErrorKind::Value, "sample_dist: token id " + std::to_string(t) + " in the history is outside [0, " +
                                        std::to_string(V) + ")");
    if (ws.seen[static_cast<size_t>(t)] == ws.stamp) continue;  // each distinct token once
    ws.seen[static_cast<size_t>(t)] = ws.stamp;
    ws.penalized.push_back(t);
  }
  return ws.penalized;
}

int32_t argmax(const float* dist, int V) { return static_cast<int32_t>(engine::first_argmax(dist, V)); }

int32_t argmax(const SupportDist& d) {
  // The first largest probability by id (support_dist's always has mass, which the zeros outside never beat).
  return d.n > 0 ? d.token(argmax(d.prob, d.n)) : 0;
}

namespace {

// The first token (ascending ids, zero mass and `exclude` skipped) at which the running mass exceeds target,
// or the last token with mass when rounding leaves target at the top (-1: none). Blocks of kScanBlock ids
// whose mass (id_lane_sum) keeps the running total at or below target are passed whole, so only one block is
// scanned one token at a time: a serial scan to the target was half a vocabulary of dependent adds (~0.15 ms
// at V = 151936). Blocks are by id, so the full path and the compact one pick bitwise the same token.
constexpr int kScanBlock = 64;
int32_t cumulative_pick(const SupportDist& d, double target, int32_t exclude) {
  double cum = 0.0;
  int last_from = -1, last_to = -1;  // the last block with mass: where the fallback's token is
  for (int j = 0; j < d.n;) {
    int end = j;
    if (d.ids == nullptr) {
      end = std::min(d.n, (j / kScanBlock + 1) * kScanBlock);
    } else {
      const int32_t block = d.ids[j] / kScanBlock;
      while (end < d.n && d.ids[end] / kScanBlock == block) ++end;
    }
    const double mass = id_lane_sum(d.prob + j, end - j, d.ids ? d.ids + j : nullptr, exclude, j);
    if (mass > 0.0) {
      last_from = j;
      last_to = end;
    }
    if (cum + mass > target) {
      for (; j < end; ++j) {  // the block where the target lies, token by token
        if (d.token(j) == exclude || d.prob[j] <= 0.0f) continue;
        cum += static_cast<double>(d.prob[j]);
        if (cum > target) return d.token(j);
      }
    } else {
      cum += mass;
      j = end;
    }
  }
  for (int j = last_to - 1; j >= last_from && j >= 0; --j)
    if (d.token(j) != exclude && d.prob[j] > 0.0f) return d.token(j);
  return -1;
}

}  // namespace

int32_t sample_from(const SupportDist& d, double u) {
  const int32_t t = cumulative_pick(d, u * id_lane_sum(d.prob, d.n, d.ids), -1);
  return t < 0 ? argmax(d) : t;  // (no mass at all)
}

int32_t sample_excluding(const SupportDist& d, int32_t x, double u) {
  const double total = id_lane_sum(d.prob, d.n, d.ids, x);
  if (!(total > 0.0)) return x;
  const int32_t t = cumulative_pick(d, u * total, x);
  return t < 0 ? x : t;
}

float prob_of(const SupportDist& d, int32_t x) {
  if (!d.ids) return x >= 0 && x < d.n ? d.prob[x] : 0.0f;
  const int32_t* end = d.ids + d.n;
  const int32_t* it = std::lower_bound(d.ids, end, x);
  return it != end && *it == x ? d.prob[it - d.ids] : 0.0f;
}

// The V floats are a SupportDist of every token (the same loops in the same order).
int32_t sample_from(const float* dist, int V, double u) { return sample_from(SupportDist{V, nullptr, dist}, u); }

int32_t sample_excluding(const float* dist, int V, int32_t x, double u) {
  return sample_excluding(SupportDist{V, nullptr, dist}, x, u);
}

int32_t sample_logits(const float* logits, int V, const SamplingPolicy& policy, std::span<const int32_t> history,
                      std::span<const int32_t> inputs, Rng& rng, SampleWorkspace& ws) {
  // Greedy without penalties: the argmax of the logits themselves (top-k keeps it; ties to the lowest
  // id as there), without the distribution's V-sized passes in double. Same errors as sample_dist.
  if (policy.temperature == 0.0f && !penalties_apply(policy)) {
    ws.peak = 1.0;
    return greedy_argmax(logits, V);
  }
  const SupportDist d = support_dist(logits, V, policy, history, inputs, ws);
  if (policy.temperature == 0.0f) return d.token(0);  // the one token of the one-hot
  return sample_from(d, rng.uniform());
}

}  // namespace strata::sampling
