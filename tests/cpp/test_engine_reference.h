#pragma once
// A naive, independent forward pass of docs/gguf.md §2 in double precision over the F32 tensors
// of a MemorySource: no caches, no chunking, every position recomputed layer by layer. K/V pass
// through the int8 rule (strata) so the comparison can be tight. Used to check the engine's
// Window and MTP end to end before (and besides) the PyTorch reference.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "strata/engine/kv_quant.h"
#include "test_engine_support.h"

namespace strata_test {

using Vec = std::vector<double>;

class NaiveModel {
 public:
  NaiveModel(const MemorySource& src, const strata::model::HParams& hp) : src_(src), hp_(hp) {}

  const float* t(const std::string& name) const {
    const auto* r = src_.find_tensor(name);
    if (!r) throw std::runtime_error("reference: missing " + name);
    return reinterpret_cast<const float*>(r->data);
  }
  bool has(const std::string& name) const { return src_.find_tensor(name) != nullptr; }

  // y = W x, W [rows, cols] row-major F32.
  static Vec mv(const float* W, int64_t rows, int64_t cols, const Vec& x) {
    Vec y(static_cast<std::size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += double(W[r * cols + c]) * x[static_cast<std::size_t>(c)];
      y[static_cast<std::size_t>(r)] = acc;
    }
    return y;
  }
  Vec rms(const Vec& x, const float* w) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + hp_.rms_eps);
    Vec y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * (w ? double(w[i]) : 1.0);
    return y;
  }
  static double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

  Vec embed(int32_t tok) const {
    const float* e = t("token_embd.weight");
    Vec v(hp_.n_embd);
    for (uint32_t i = 0; i < hp_.n_embd; ++i) v[i] = e[static_cast<int64_t>(tok) * hp_.n_embd + i];
    return v;
  }

  // Streams per position: [T][n] of Vec(d).
  using Streams = std::vector<std::vector<Vec>>;

  struct Hc {
    std::vector<Vec> pre, post, comb;  // per position
  };

  Hc hc_coef(const std::string& prefix, const Streams& X) const {
    const int n = static_cast<int>(hp_.hc_count);
    const int64_t d = hp_.n_embd;
    Hc h;
    for (const auto& xs : X) {
      if (n == 1) {
        h.pre.push_back({1.0});
        h.post.push_back({1.0});
        h.comb.push_back({1.0});
        continue;
      }
      Vec flat;
      for (const auto& s : xs) flat.insert(flat.end(), s.begin(), s.end());
      flat = rms(flat, nullptr);
      const int m = (2 + n) * n;
      Vec mix = mv(t(prefix + "_fn.weight"), m, n * d, flat);
      const float* base = t(prefix + "_base.weight");
      const float* scale = t(prefix + "_scale.weight");
      const double eps = hp_.hc_eps;
      Vec pre(static_cast<std::size_t>(n)), post(static_cast<std::size_t>(n)), comb(static_cast<std::size_t>(n * n));
      for (int s = 0; s < n; ++s) {
        pre[static_cast<std::size_t>(s)] = sig(mix[static_cast<std::size_t>(s)] * scale[0] + base[s]) + eps;
        post[static_cast<std::size_t>(s)] = 2 * sig(mix[static_cast<std::size_t>(n + s)] * scale[1] + base[n + s]);
      }
      for (int j = 0; j < n; ++j) {
        double mx = -1e300;
        for (int k = 0; k < n; ++k)
          mx = std::max(mx, mix[static_cast<std::size_t>(2 * n + j * n + k)] * scale[2] + base[2 * n + j * n + k]);
        double z = 0;
        for (int k = 0; k < n; ++k)
          z += std::exp(mix[static_cast<std::size_t>(2 * n + j * n + k)] * scale[2] + base[2 * n + j * n + k] - mx);
        for (int k = 0; k < n; ++k)
          comb[static_cast<std::size_t>(j * n + k)] =
              std::exp(mix[static_cast<std::size_t>(2 * n + j * n + k)] * scale[2] + base[2 * n + j * n + k] - mx) / z +
              eps;
      }
      auto C = [&](int j, int k) -> double& { return comb[static_cast<std::size_t>(j * n + k)]; };
      auto cols = [&] {
        for (int k = 0; k < n; ++k) {
          double s = 0;
          for (int j = 0; j < n; ++j) s += C(j, k);
          for (int j = 0; j < n; ++j) C(j, k) /= s + eps;
        }
      };
      auto rows = [&] {
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int k = 0; k < n; ++k) s += C(j, k);
          for (int k = 0; k < n; ++k) C(j, k) /= s + eps;
        }
      };
      cols();
      for (uint32_t it = 1; it < hp_.hc_sinkhorn_iters; ++it) {
        rows();
        cols();
      }
      h.pre.push_back(pre);
      h.post.push_back(post);
      h.comb.push_back(comb);
    }
    return h;
  }

  Vec collapse(const std::vector<Vec>& xs, const Vec& pre) const {
    Vec c(xs[0].size(), 0.0);
    for (std::size_t s = 0; s < xs.size(); ++s)
      for (std::size_t i = 0; i < c.size(); ++i) c[i] += pre[s] * xs[s][i];
    return c;
  }
  void expand(std::vector<Vec>& xs, const Vec& y, const Vec& post, const Vec& comb) const {
    const std::size_t n = xs.size();
    std::vector<Vec> out(n, Vec(y.size(), 0.0));
    for (std::size_t k = 0; k < n; ++k)
      for (std::size_t i = 0; i < y.size(); ++i) {
        double acc = post[k] * y[i];
        for (std::size_t j = 0; j < n; ++j) acc += comb[j * n + k] * xs[j][i];
        out[k][i] = acc;
      }
    xs = out;
  }

  void rope(double* x, int64_t pos) const {
    const int r = static_cast<int>(hp_.rope_dim);
    for (int i = 0; i < r / 2; ++i) {
      const double th = double(pos) * double(1.0f / std::pow(hp_.rope_base, float(2 * i) / float(r)));
      const double a = x[i], b = x[i + r / 2];
      x[i] = a * std::cos(th) - b * std::sin(th);
      x[i + r / 2] = b * std::cos(th) + a * std::sin(th);
    }
  }
  Vec kv_round(const Vec& x) const {
    if (hp_.kv_type != strata::model::KvType::Int8) return x;
    const int dh = static_cast<int>(hp_.head_dim);
    Vec out(x.size());
    std::vector<float> f(static_cast<std::size_t>(dh)), back(static_cast<std::size_t>(dh));
    std::vector<int8_t> q(static_cast<std::size_t>(dh));
    std::vector<uint16_t> s(static_cast<std::size_t>(strata::engine::kv_blocks(dh)));
    for (std::size_t h0 = 0; h0 < x.size(); h0 += static_cast<std::size_t>(dh)) {
      for (int i = 0; i < dh; ++i)
        f[static_cast<std::size_t>(i)] = static_cast<float>(x[h0 + static_cast<std::size_t>(i)]);
      strata::engine::kv_quantize(f.data(), dh, q.data(), s.data());
      strata::engine::kv_dequantize(q.data(), s.data(), dh, back.data());
      for (int i = 0; i < dh; ++i) out[h0 + static_cast<std::size_t>(i)] = back[static_cast<std::size_t>(i)];
    }
    return out;
  }

  std::vector<int64_t> cells_for(int64_t p, int64_t S, int64_t W, int64_t T,
                                 const std::vector<double>* scores_all) const {
    std::vector<int64_t> out;
    if (W == 0) {
      for (int64_t c = 0; c <= p; ++c) out.push_back(c);
      return out;
    }
    std::vector<int64_t> cand;
    for (int64_t c = 0; c <= p; ++c) {
      const bool sink = c<S, win = c> p - W;
      if (sink || win)
        out.push_back(c);
      else
        cand.push_back(c);
    }
    if (scores_all && T > 0) {
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
        return (*scores_all)[static_cast<std::size_t>(a)] > (*scores_all)[static_cast<std::size_t>(b)];
      });
      if (static_cast<int64_t>(cand.size()) > T) cand.resize(static_cast<std::size_t>(T));
      out.insert(out.end(), cand.begin(), cand.end());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // One block over all positions [0, T): X updated. S/W/T give the cell policy; indexer on/off.
  void block(const std::string& p, Streams& X, int64_t S, int64_t W, int64_t Tk, bool indexer) const {
    const int64_t T = static_cast<int64_t>(X.size());
    const int64_t d = hp_.n_embd, dh = hp_.head_dim, hq = hp_.n_head, hkv = hp_.n_head_kv;
    const bool gated = hp_.attn_gated;
    // Attention.
    Hc hc = hc_coef(p + "hc_attn", X);
    std::vector<Vec> xn(static_cast<std::size_t>(T)), q(static_cast<std::size_t>(T)), k(static_cast<std::size_t>(T)),
        v(static_cast<std::size_t>(T)), ik(static_cast<std::size_t>(T)), iq(static_cast<std::size_t>(T)),
        iw(static_cast<std::size_t>(T));
    for (int64_t i = 0; i < T; ++i) {
      const auto u = static_cast<std::size_t>(i);
      xn[u] = rms(collapse(X[u], hc.pre[u]), t(p + "attn_norm.weight"));
      q[u] = mv(t(p + "attn_q.weight"), hq * dh * (gated ? 2 : 1), d, xn[u]);
      k[u] = mv(t(p + "attn_k.weight"), hkv * dh, d, xn[u]);
      v[u] = mv(t(p + "attn_v.weight"), hkv * dh, d, xn[u]);
      for (int64_t g = 0; g < hkv; ++g) {
        Vec kh(k[u].begin() + g * dh, k[u].begin() + (g + 1) * dh);
        kh = rms(kh, t(p + "attn_k_norm.weight"));
        rope(kh.data(), i);
        std::copy(kh.begin(), kh.end(), k[u].begin() + g * dh);
      }
      k[u] = kv_round(k[u]);
      v[u] = kv_round(v[u]);
      if (indexer) {
        ik[u] = mv(t(p + "indexer.attn_k.weight"), hp_.indexer_dim, d, xn[u]);
        iq[u] = mv(t(p + "indexer.attn_q.weight"), int64_t{hp_.indexer_heads} * hp_.indexer_dim, d, xn[u]);
        iw[u] = mv(t(p + "indexer.weights.weight"), hp_.indexer_heads, d, xn[u]);
      }
    }
    std::vector<Vec> attn_out(static_cast<std::size_t>(T));
    for (int64_t i = 0; i < T; ++i) {
      const auto u = static_cast<std::size_t>(i);
      std::vector<double> scores;
      if (indexer) {
        scores.assign(static_cast<std::size_t>(i + 1), 0.0);
        for (int64_t c = 0; c <= i; ++c) {
          double tot = 0;
          for (uint32_t j = 0; j < hp_.indexer_heads; ++j) {
            double dot = 0;
            for (uint32_t e = 0; e < hp_.indexer_dim; ++e)
              dot += iq[u][j * hp_.indexer_dim + e] * ik[static_cast<std::size_t>(c)][e];
            tot += iw[u][j] * std::max(dot, 0.0);
          }
          scores[static_cast<std::size_t>(c)] = tot;
        }
      }
      const auto cells = cells_for(i, S, W, Tk, indexer ? &scores : nullptr);
      Vec att(static_cast<std::size_t>(hq * dh), 0.0);
      for (int64_t h = 0; h < hq; ++h) {
        Vec qh(q[u].begin() + (gated ? 2 * h * dh : h * dh), q[u].begin() + (gated ? 2 * h * dh : h * dh) + dh);
        qh = rms(qh, t(p + "attn_q_norm.weight"));
        rope(qh.data(), i);
        const int64_t g = h / (hq / hkv);
        std::vector<double> s;
        for (int64_t c : cells) {
          double dot = 0;
          for (int64_t e = 0; e < dh; ++e)
            dot +=
                qh[static_cast<std::size_t>(e)] * k[static_cast<std::size_t>(c)][static_cast<std::size_t>(g * dh + e)];
          s.push_back(dot / std::sqrt(double(dh)));
        }
        const double mx = *std::max_element(s.begin(), s.end());
        double z = 0;
        for (double& x : s) z += (x = std::exp(x - mx));
        for (std::size_t ci = 0; ci < cells.size(); ++ci)
          for (int64_t e = 0; e < dh; ++e)
            att[static_cast<std::size_t>(h * dh + e)] +=
                s[ci] / z * v[static_cast<std::size_t>(cells[ci])][static_cast<std::size_t>(g * dh + e)];
        if (gated)
          for (int64_t e = 0; e < dh; ++e)
            att[static_cast<std::size_t>(h * dh + e)] *= sig(q[u][static_cast<std::size_t>(2 * h * dh + dh + e)]);
      }
      attn_out[u] = mv(t(p + "attn_output.weight"), d, hq * dh, att);
    }
    for (int64_t i = 0; i < T; ++i) {
      const auto u = static_cast<std::size_t>(i);
      expand(X[u], attn_out[u], hc.post[u], hc.comb[u]);
    }
    // MoE.
    Hc hf = hc_coef(p + "hc_ffn", X);
    const int64_t E = hp_.n_expert, K = hp_.n_expert_used, F = hp_.ff_expert, Fs = hp_.ff_shared;
    for (int64_t i = 0; i < T; ++i) {
      const auto u = static_cast<std::size_t>(i);
      Vec x = rms(collapse(X[u], hf.pre[u]), t(p + "ffn_norm.weight"));
      Vec lg = mv(t(p + "ffn_gate_inp.weight"), E, d, x);
      const double mx = *std::max_element(lg.begin(), lg.end());
      double z = 0;
      for (double& l : lg) z += (l = std::exp(l - mx));
      for (double& l : lg) l /= z;
      std::vector<int64_t> ids(static_cast<std::size_t>(E));
      std::iota(ids.begin(), ids.end(), 0);
      std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) {
        return lg[static_cast<std::size_t>(a)] > lg[static_cast<std::size_t>(b)];
      });
      double sum = 0;
      for (int64_t j = 0; j < K; ++j) sum += lg[static_cast<std::size_t>(ids[static_cast<std::size_t>(j)])];
      sum = std::max(sum, std::ldexp(1.0, -14));
      Vec y(static_cast<std::size_t>(d), 0.0);
      for (int64_t j = 0; j < K; ++j) {
        const int64_t e = ids[static_cast<std::size_t>(j)];
        const double wgt = lg[static_cast<std::size_t>(e)] / sum;
        Vec gg = mv(t(p + "ffn_gate_exps.weight") + e * F * d, F, d, x);
        Vec uu = mv(t(p + "ffn_up_exps.weight") + e * F * d, F, d, x);
        for (int64_t f = 0; f < F; ++f)
          gg[static_cast<std::size_t>(f)] =
              gg[static_cast<std::size_t>(f)] * sig(gg[static_cast<std::size_t>(f)]) * uu[static_cast<std::size_t>(f)];
        Vec dd = mv(t(p + "ffn_down_exps.weight") + e * d * F, d, F, gg);
        for (int64_t c = 0; c < d; ++c) y[static_cast<std::size_t>(c)] += wgt * dd[static_cast<std::size_t>(c)];
      }
      if (Fs > 0) {
        Vec gg = mv(t(p + "ffn_gate_shexp.weight"), Fs, d, x);
        Vec uu = mv(t(p + "ffn_up_shexp.weight"), Fs, d, x);
        for (int64_t f = 0; f < Fs; ++f)
          gg[static_cast<std::size_t>(f)] =
              gg[static_cast<std::size_t>(f)] * sig(gg[static_cast<std::size_t>(f)]) * uu[static_cast<std::size_t>(f)];
        Vec dd = mv(t(p + "ffn_down_shexp.weight"), d, Fs, gg);
        const double gate = sig(mv(t(p + "ffn_gate_inp_shexp.weight"), 1, d, x)[0]);
        for (int64_t c = 0; c < d; ++c) y[static_cast<std::size_t>(c)] += gate * dd[static_cast<std::size_t>(c)];
      }
      expand(X[u], y, hf.post[u], hf.comb[u]);
    }
  }

  Vec head(const std::vector<Vec>& xs, const std::string& fn, const std::string& base, const std::string& scale,
           const float* norm) const {
    const int n = static_cast<int>(hp_.hc_count);
    const int64_t d = hp_.n_embd;
    Vec h;
    if (n == 1) {
      h = xs[0];
    } else {
      Vec flat;
      for (const auto& s : xs) flat.insert(flat.end(), s.begin(), s.end());
      Vec mix = mv(t(fn), n, n * d, rms(flat, nullptr));
      Vec pre(static_cast<std::size_t>(n));
      for (int s = 0; s < n; ++s)
        pre[static_cast<std::size_t>(s)] =
            sig(mix[static_cast<std::size_t>(s)] * t(scale)[0] + t(base)[s]) + hp_.hc_eps;
      h = collapse(xs, pre);
    }
    return rms(h, norm);
  }

  // Main model: final streams and logits of every position.
  void forward(const std::vector<int32_t>& toks, Streams& X, std::vector<Vec>& logits) const {
    const int n = static_cast<int>(hp_.hc_count);
    X.assign(toks.size(), {});
    for (std::size_t i = 0; i < toks.size(); ++i) X[i].assign(static_cast<std::size_t>(n), embed(toks[i]));
    for (uint32_t l = 0; l < hp_.n_layer; ++l)
      block("blk." + std::to_string(l) + ".", X, hp_.sink_count, hp_.sliding_window, hp_.indexer_top_k,
            hp_.uses_indexer());
    logits.clear();
    for (auto& xs : X) {
      Vec h =
          head(xs, "output_hc_fn.weight", "output_hc_base.weight", "output_hc_scale.weight", t("output_norm.weight"));
      logits.push_back(mv(t("output.weight"), hp_.n_vocab, hp_.n_embd, h));
    }
  }

  // MTP over rows 0..T-1 given input streams H[i] and next tokens; returns output streams and logits.
  void mtp(const Streams& H, const std::vector<int32_t>& next, int64_t S, int64_t W, Streams& out,
           std::vector<Vec>& logits) const {
    const std::string M = "blk." + std::to_string(hp_.n_layer) + ".";
    const int64_t d = hp_.n_embd;
    out.assign(H.size(), {});
    for (std::size_t i = 0; i < H.size(); ++i) {
      Vec e = mv(t(M + "nextn.fc_embedding.weight"), d, d, rms(embed(next[i]), t(M + "nextn.enorm.weight")));
      for (const auto& hs : H[i]) {
        Vec f = mv(t(M + "nextn.fc_hidden.weight"), d, d, rms(hs, t(M + "nextn.hnorm.weight")));
        for (int64_t c = 0; c < d; ++c) f[static_cast<std::size_t>(c)] += e[static_cast<std::size_t>(c)];
        out[i].push_back(f);
      }
    }
    block(M, out, S, W, 0, false);
    const auto* ids = reinterpret_cast<const int32_t*>(src_.find_tensor(M + "nextn.vocab_ids")->data);
    logits.clear();
    for (auto& xs : out) {
      Vec h = head(xs, M + "nextn.hc_head_fn.weight", M + "nextn.hc_head_base.weight", M + "nextn.hc_head_scale.weight",
                   t(M + "nextn.shared_head_norm.weight"));
      Vec l(hp_.mtp_vocab);
      for (uint32_t r = 0; r < hp_.mtp_vocab; ++r)
        l[r] = mv(t("output.weight") + static_cast<int64_t>(ids[r]) * d, 1, d, h)[0];
      logits.push_back(l);
    }
  }

 private:
  const MemorySource& src_;
  strata::model::HParams hp_;
};

}  // namespace strata_test
