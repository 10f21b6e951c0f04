#include "strata/engine/attention_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "strata/engine/attention_kernels.h"
#include "strata/engine/vec_dot.h"

namespace strata::engine {

KvHeadData from_cell(KvHeadData h, int64_t c0) {
  const int64_t nb = kv_blocks(h.dh);
  if (h.k8) {
    h.k8 += c0 * h.dh;
    h.v8 += c0 * h.dh;
    h.ks += c0 * nb;
    h.vs += c0 * nb;
  } else if (h.kh) {
    h.kh += c0 * h.dh;
    h.vh += c0 * h.dh;
  } else {
    h.kf += c0 * h.dh;
    h.vf += c0 * h.dh;
  }
  return h;
}

void attend_head(const KvCells& kv, int layer, int kv_head, const float* q, const int32_t* cells, int64_t n,
                 float* scores, float* chunk_o, float* out) {
  const float* qs[1] = {q};
  float* outs[1] = {out};
  attend_group(kv, layer, kv_head, qs, 1, cells, n, scores, chunk_o, outs);
}

namespace {

// The softmax and values of G heads whose scores are ready: head g's n scores at scores[g·stride ..].
// ask_ahead: each chunk's kernel asks for the next chunk's V rows (not when an earlier row of attend_rows
// has just read them: asking for lines in cache costs, a warm group's values ran 30-50 % slower).
void softmax_values(const KvCells& kv, const KvHeadData& hd, int G, const int32_t* cells, int64_t n,
                    const float* scores, int64_t stride, float* chunk_o, float* const* out, bool ask_ahead) {
  const int dh = kv.head_dim();
  const auto value_fn = attn_kernels().values_for(kv.type());
  const VecKernels& vk = vec_kernels();
  float big[kMaxHeadGroup], denom[kMaxHeadGroup], m[kMaxHeadGroup], l[kMaxHeadGroup];
  float* co[kMaxHeadGroup];
  // A chunk's weights e^{s−m} per head, computed once: exp_f32 (engine/vec_dot.h), which the vector
  // kernels reproduce lane for lane and the Metal kernels compute too (exp_cpu), so the bytes are the
  // same on every path. (std::exp, one scalar call per weight, was ~4 % of a decode step at 512 cells.)
  float e[kMaxHeadGroup * kSoftmaxChunk];
  for (int g = 0; g < G; ++g) {
    big[g] = vk.max(scores + g * stride, n);
    denom[g] = 0.0f;
    co[g] = chunk_o + static_cast<std::size_t>(g) * dh;
  }
  for (int64_t c0 = 0; c0 < n; c0 += kSoftmaxChunk) {
    const int64_t len = std::min(n - c0, int64_t{kSoftmaxChunk});
    for (int g = 0; g < G; ++g) {
      const float* s = scores + g * stride + c0;
      float* eg = e + g * kSoftmaxChunk;
      m[g] = vk.shift_by_max(s, len, eg);
      if (len < kSoftmaxChunk) vk.exp(eg, eg, len);
      l[g] = 0.0f;
    }
    // A whole chunk's heads lie end to end: one call, whose vectors overlap (a call per head left
    // each 64-element exp waiting on its own dependency chain).
    if (len == kSoftmaxChunk) vk.exp(e, e, G * kSoftmaxChunk);
    // Each head's sum in list order, as the Metal kernels add them; the heads' chains interleaved so
    // that their dependent adds overlap instead of running one 64-add chain after another.
    for (int64_t i = 0; i < len; ++i)
      for (int g = 0; g < G; ++g) l[g] += e[g * kSoftmaxChunk + i];
    // co[g] = Σ_i e_i · v_i over the chunk, the accumulators in registers across its cells; the kernel
    // asks for the next chunk's V rows as it goes (entries past its own list).
    const KvHeadData chunk =
        asking_for(cells ? hd : from_cell(hd, c0), len, ask_ahead ? std::min<int64_t>(kSoftmaxChunk, n - c0 - len) : 0);
    value_fn(chunk, e, kSoftmaxChunk, G, cells ? cells + c0 : nullptr, len, co);
    // The chunk's factors e^{m−big} of all heads in one kernel call (each lane exp_f32's bits).
    float f[kMaxHeadGroup];
    for (int g = 0; g < G; ++g) f[g] = m[g] - big[g];
    vk.exp(f, f, G);
    for (int g = 0; g < G; ++g) {
      denom[g] += f[g] * l[g];
      for (int j = 0; j < dh; ++j) out[g][j] += f[g] * co[g][j];
    }
  }
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < dh; ++j) out[g][j] /= denom[g];
}

}  // namespace

void attend_group(const KvCells& kv, int layer, int kv_head, const float* const* q, int G, const int32_t* cells,
                  int64_t n, float* scores, float* chunk_o, float* const* out) {
  const int dh = kv.head_dim();
  for (int g = 0; g < G; ++g) std::memset(out[g], 0, sizeof(float) * static_cast<std::size_t>(dh));
  if (n <= 0) return;
  const KvHeadData hd = kv.head_data(layer, kv_head);
  // Scores head-major: scores[g·n + i] = (q_g · k_i) / sqrt(Dh), all cells in one call, which asks for
  // the first value chunk's V rows as it goes.
  attn_kernels().scores_for(kv.type())(asking_for(hd, 0, std::min<int64_t>(kSoftmaxChunk, n)), q, G, cells, n,
                                       std::sqrt(static_cast<float>(dh)), scores, n);
  softmax_values(kv, hd, G, cells, n, scores, n, chunk_o, out, true);
}

void attend_rows(const KvCells& kv, int layer, int kv_head, const float* const* q, int G, int T, int64_t n0,
                 float* scores, float* chunk_o, float* const* out) {
  const int dh = kv.head_dim();
  for (int i = 0; i < G * T; ++i) std::memset(out[i], 0, sizeof(float) * static_cast<std::size_t>(dh));
  if (n0 <= 0) return;
  const KvHeadData hd = kv.head_data(layer, kv_head);
  // Every row's heads scored over the last row's cells in one call (each score is the per-cell
  // formulation, whatever the heads and cells around it: bitwise what each row's own call gives);
  // row t then uses its first n0 + t.
  const int64_t n = n0 + T - 1;
  attn_kernels().scores_for(kv.type())(asking_for(hd, 0, std::min<int64_t>(kSoftmaxChunk, n)), q, G * T, nullptr, n,
                                       std::sqrt(static_cast<float>(dh)), scores, n);
  for (int t = 0; t < T; ++t)
    softmax_values(kv, hd, G, nullptr, n0 + t, scores + static_cast<std::size_t>(t) * G * n, n, chunk_o, out + t * G,
                   t == 0);
}

}  // namespace strata::engine
