// Cost of a window of R rows (a decode step R = 1, a verification window R = 1 + drafts) on a real
// model after a prompt, and where it goes (docs/benchmarks.md, "Window rows").
//
//   window_rows_bench [--model PATH] [--threads N] [--reps N] [--prompt N] [--max-rows R] [--no-pieces]
//                     [--no-repack]  (the weights as mapped; by default repacked, as an engine runs them)
//                     [--only R]   (only windows of R rows, no output: instruction counts under valgrind)
//
// Part 1 times engine::Window::run for R = 1..max-rows rows at position P (after a P-token
// prompt), rolling back to P between repetitions; R = 1 asks for the last row's logits (plain
// decode), R > 1 for every row's (verification). The R values are interleaved within each
// repetition so load from other processes falls on all alike; the median of the repetitions is
// reported.
// Part 2 runs the same forward pass piece by piece (the public pieces of engine/block.h, in
// run_block's order, on a KvCells / Scratch of its own) with a clock around each piece, and times
// the dense linear maps alone on the same rows: attention projections, the shared expert, the
// router, the output head. Routed experts ≈ MoE − shared − router; attention core ≈ attention −
// its projections.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "strata/engine/block.h"
#include "strata/engine/hc_combine.h"
#include "strata/engine/linear.h"
#include "strata/engine/multi_linear.h"
#include "strata/engine/ops.h"
#include "strata/engine/parallel.h"
#include "strata/engine/prepared_model.h"
#include "strata/engine/window.h"
#include "strata/model/model.h"
#include "strata/util/thread_pool.h"

// Under callgrind (--instr-atstart=no) only the timed windows are instrumented.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define STRATA_BENCH_INSTRUMENT() CALLGRIND_START_INSTRUMENTATION
#else
#define STRATA_BENCH_INSTRUMENT() ((void)0)
#endif

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A deterministic token sequence over the vocabulary.
std::vector<int32_t> tokens_for(int64_t n, uint32_t vocab, uint32_t seed) {
  std::vector<int32_t> t(static_cast<std::size_t>(n));
  uint64_t s = 0x9E3779B97F4A7C15ull ^ seed;
  for (auto& x : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>((s >> 33) % vocab);
  }
  return t;
}

enum Section { kEmbed, kHc, kAttn, kMoe, kHead, kOutput, kSections };
const char* kSectionNames[kSections] = {"embed", "norms+hc", "attention", "moe", "head norm+hc", "output head"};

// The forward pass of engine::Window::run, piece by piece, with a clock around each piece.
class PiecewiseWindow {
 public:
  PiecewiseWindow(const model::Model& m, ThreadPool* pool, int max_rows, int64_t max_ctx)
      : m_(m),
        hp_(m.hparams()),
        pool_(pool),
        policy_{hp_.sink_count, hp_.sliding_window, hp_.uses_indexer() ? hp_.indexer_top_k : 0},
        kv_(static_cast<int>(hp_.n_layer), max_ctx, static_cast<int>(hp_.n_head_kv), static_cast<int>(hp_.head_dim),
            hp_.kv_type, hp_.uses_indexer() ? static_cast<int>(hp_.indexer_dim) : 0),
        rope_(static_cast<int>(hp_.rope_dim), hp_.rope_base) {
    engine::ScratchShape shape;
    shape.max_rows = max_rows;
    shape.max_ctx = max_ctx;
    shape.max_list = policy_.window > 0 ? engine::max_cells(policy_, max_ctx) : 1;
    shape.n_slots = engine::parallel_slots_count(pool);
    s_ = std::make_unique<engine::Scratch>(hp_, shape);
    X_.resize(static_cast<std::size_t>(max_rows) * hp_.hc_count * hp_.n_embd);
    logits_.resize(static_cast<std::size_t>(max_rows) * hp_.n_vocab);
  }

  engine::Scratch& scratch() { return *s_; }

  // t[section] += ms. logit_rows: 0, 1 (last) or R.
  void run(const int32_t* tok, int R, int64_t start, int logit_rows, double* t) {
    const int64_t d = hp_.n_embd, n = hp_.hc_count, nd = n * d;
    float* X = X_.data();
    engine::Scratch& s = *s_;
    auto t0 = Clock::now();
    for (int r = 0; r < R; ++r) {
      engine::dequantize_weight_row(m_.tok_embd, tok[r], X + r * nd);
      for (int64_t k = 1; k < n; ++k) std::memcpy(X + r * nd + k * d, X + r * nd, sizeof(float) * d);
    }
    t[kEmbed] += ms_since(t0);
    engine::BlockContext c;
    c.hp = &hp_;
    c.kv = &kv_;
    c.policy = policy_;
    c.use_indexer = hp_.uses_indexer();
    c.rope = &rope_;
    c.s = &s;
    c.pool = pool_;
    for (uint32_t l = 0; l < hp_.n_layer; ++l) {
      c.w = &m_.layers[l];
      c.kv_layer = static_cast<int>(l);
      c.expert_layer = static_cast<int>(l);
      t0 = Clock::now();
      engine::hc_enter(hp_, c.w->hc_attn, X, R, s, pool_);
      for (int r = 0; r < R; ++r)
        engine::rms_norm(s.collapsed.data() + r * d, d, hp_.rms_eps, c.w->attn.norm, s.xn.data() + r * d);
      t[kHc] += ms_since(t0);
      t0 = Clock::now();
      engine::attention_forward(c, R, start);
      t[kAttn] += ms_since(t0);
      t0 = Clock::now();
      engine::CombineArgs ca;
      ca.d = d;
      ca.n = static_cast<int>(n);
      ca.n_tok = R;
      ca.k = 1;
      ca.routed = s.out.data();
      ca.weights = s.one.data();
      ca.post = s.post.data();
      ca.comb = s.comb.data();
      ca.x_in = X;
      ca.x_out = X;
      engine::hc_combine(ca);
      engine::hc_enter(hp_, c.w->hc_ffn, X, R, s, pool_);
      for (int r = 0; r < R; ++r)
        engine::rms_norm(s.collapsed.data() + r * d, d, hp_.rms_eps, c.w->moe.norm, s.xn.data() + r * d);
      t[kHc] += ms_since(t0);
      t0 = Clock::now();
      engine::moe_forward(c, R);
      t[kMoe] += ms_since(t0);
      t0 = Clock::now();
      engine::CombineArgs cm;
      cm.d = d;
      cm.n = static_cast<int>(n);
      cm.n_tok = R;
      cm.k = static_cast<int>(hp_.n_expert_used);
      cm.routed = s.routed.data();
      cm.weights = s.weights.data();
      cm.shared = hp_.ff_shared > 0 ? s.shared.data() : nullptr;
      cm.shared_gate = hp_.ff_shared > 0 ? s.shared_gate.data() : nullptr;
      cm.post = s.post.data();
      cm.comb = s.comb.data();
      cm.x_in = X;
      cm.x_out = X;
      engine::hc_combine(cm);
      t[kHc] += ms_since(t0);
    }
    if (logit_rows > 0) {
      const int first = R - logit_rows;
      t0 = Clock::now();
      engine::head_input(hp_, m_.head_hc, m_.output_norm, X + first * nd, logit_rows, s, s.h.data(), pool_);
      t[kHead] += ms_since(t0);
      t0 = Clock::now();
      engine::linear(m_.logits_head(), s.h.data(), logit_rows, logits_.data(), pool_);
      t[kOutput] += ms_since(t0);
    }
  }

 private:
  const model::Model& m_;
  const model::HParams& hp_;
  ThreadPool* pool_;
  engine::CellPolicy policy_;
  engine::KvCells kv_;
  engine::Rope rope_;
  std::unique_ptr<engine::Scratch> s_;
  std::vector<float> X_, logits_;
};

// The dense maps alone over R rows of activations: ms for one pass over every layer.
struct DenseTimes {
  double attn_proj = 0, shared = 0, router = 0, expert1 = 0, output = 0;
};

void time_dense(const model::Model& m, engine::Scratch& s, ThreadPool* pool, int R, DenseTimes& out) {
  const model::HParams& hp = m.hparams();
  const int64_t d = hp.n_embd;
  std::vector<float> x(static_cast<std::size_t>(R) * std::max<int64_t>({d, hp.q_rows(), hp.ff_shared, hp.ff_expert}),
                       0.5f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  // y holds R rows of the widest output: the head, q, or a (widened) expert's gate/up.
  std::vector<float> y(static_cast<std::size_t>(R) *
                       std::max<int64_t>({hp.n_vocab, hp.q_rows(), hp.ff_shared, hp.ff_expert, d, 4096}));
  auto t0 = Clock::now();
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const model::AttentionWeights& a = m.layers[l].attn;
    for (const model::Weight* w : {&a.q, &a.k, &a.v, &a.idx_q, &a.idx_k, &a.idx_w})
      if (w->present()) engine::linear(*w, x.data(), R, y.data(), pool);
    engine::linear(a.o, x.data(), R, y.data(), pool);
  }
  out.attn_proj += ms_since(t0);
  t0 = Clock::now();
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const model::MoeWeights& mw = m.layers[l].moe;
    if (!mw.sh_gate.present()) continue;
    engine::linear(mw.sh_gate, x.data(), R, y.data(), pool);
    engine::linear(mw.sh_up, x.data(), R, y.data(), pool);
    engine::linear(mw.sh_gate_inp, x.data(), R, y.data(), pool);
    engine::linear(mw.sh_down, x.data(), R, y.data(), pool);
  }
  out.shared += ms_since(t0);
  t0 = Clock::now();
  for (uint32_t l = 0; l < hp.n_layer; ++l) engine::linear(m.layers[l].moe.router, x.data(), R, y.data(), pool);
  out.router += ms_since(t0);
  // One routed expert (gate, up, down) over R rows, every layer.
  t0 = Clock::now();
  for (uint32_t l = 0; l < hp.n_layer; ++l) {
    const model::MoeWeights& mw = m.layers[l].moe;
    engine::linear(mw.gate.expert(0), x.data(), R, y.data(), pool);
    engine::linear(mw.up.expert(0), x.data(), R, y.data(), pool);
    engine::linear(mw.down.expert(0), x.data(), R, y.data(), pool);
  }
  out.expert1 += ms_since(t0);
  t0 = Clock::now();
  engine::linear(m.logits_head(), x.data(), R, y.data(), pool);
  out.output += ms_since(t0);
  (void)s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "python/strata/models/strata-demo.gguf";
  int threads = 1, reps = 200, max_rows = 5;
  int64_t prompt = 256;
  bool pieces = true;
  bool repack = true;
  int only = 0;  // > 0: time only windows of this many rows (instruction counts under valgrind)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model")
      path = next();
    else if (a == "--no-pieces")
      pieces = false;
    else if (a == "--no-repack")
      repack = false;
    else if (a == "--only")
      only = std::atoi(next());
    else if (a == "--threads")
      threads = std::atoi(next());
    else if (a == "--reps")
      reps = std::atoi(next());
    else if (a == "--prompt")
      prompt = std::atoll(next());
    else if (a == "--max-rows")
      max_rows = std::atoi(next());
    else {
      std::fprintf(stderr,
                   "usage: %s [--model PATH] [--threads N] [--reps N] [--prompt N] [--max-rows R] [--no-pieces] "
                   "[--no-repack] [--only R]\n",
                   argv[0]);
      return 2;
    }
  }
  ThreadPool pool(threads);
  // As an engine runs it: the file's K/V cell type and the weights repacked (unless --no-repack).
  const auto prepared =
      engine::prepare_cpu_model(engine::load_cpu_model(path, "", std::nullopt), model::DrafterRequant::Off,
                                repack ? cpu::RepackMode::Auto : cpu::RepackMode::Off, true, &pool);
  const model::Model* model = prepared->model.get();
  const model::HParams& hp = model->hparams();
  engine::WindowConfig cfg;
  cfg.max_ctx = prompt + 64;
  cfg.max_rows = std::max(64, max_rows);
  cfg.pool = &pool;
  engine::Window w(*model, cfg);
  const std::vector<int32_t> toks = tokens_for(prompt + max_rows, hp.n_vocab, 1);
  for (int64_t s = 0; s < prompt; s += 64)  // the prompt in chunks of 64 rows, no logits
    w.run(toks.data() + s, static_cast<int>(std::min<int64_t>(64, prompt - s)), s, engine::LogitRows::None);
  w.commit(prompt);

  // Part 1: Window::run.
  STRATA_BENCH_INSTRUMENT();
  std::vector<std::vector<double>> tw(static_cast<std::size_t>(max_rows) + 1);
  for (int rep = 0; rep < reps + 3; ++rep)
    for (int k = 0; k < max_rows; ++k) {
      const int R = 1 + (k + rep) % max_rows;  // rotate the order
      if (only > 0 && R != only) continue;
      w.rollback(prompt);
      const auto t0 = Clock::now();
      w.run(toks.data() + prompt, R, prompt, R == 1 ? engine::LogitRows::Last : engine::LogitRows::All);
      const double ms = ms_since(t0);
      if (rep >= 3) tw[static_cast<std::size_t>(R)].push_back(ms);  // 3 warm-up rounds
    }
  if (only > 0) return 0;
  std::printf("model %s, %d threads, position %lld, %d reps (median)\n", path.c_str(), threads,
              static_cast<long long>(prompt), reps);
  // The minimum is the run least disturbed by other processes; on a shared machine it moves less
  // than the median.
  std::printf("\nWindow::run\nrows  median ms  x 1-row  min ms   x 1-row\n");
  const double one = median(tw[1]);
  const double one_min = *std::min_element(tw[1].begin(), tw[1].end());
  for (int R = 1; R <= max_rows; ++R) {
    const auto& v = tw[static_cast<std::size_t>(R)];
    const double t = median(v), tmin = *std::min_element(v.begin(), v.end());
    std::printf("%4d  %9.4f  %7.2f  %7.4f  %7.2f\n", R, t, t / one, tmin, tmin / one_min);
  }

  if (!pieces) return 0;
  // Part 2: the pieces.
  PiecewiseWindow pw(*model, &pool, cfg.max_rows, cfg.max_ctx);
  for (int64_t off = 0; off < prompt; off += 64) {
    double sink[kSections] = {};
    pw.run(toks.data() + off, static_cast<int>(std::min<int64_t>(64, prompt - off)), off, 0, sink);
  }
  const int preps = std::max(1, reps / 2);
  std::vector<std::vector<std::vector<double>>> ts(static_cast<std::size_t>(max_rows) + 1,
                                                   std::vector<std::vector<double>>(kSections));
  std::vector<std::vector<double>> total(static_cast<std::size_t>(max_rows) + 1);
  std::vector<std::vector<DenseTimes>> td(static_cast<std::size_t>(max_rows) + 1);
  for (int rep = 0; rep < preps + 3; ++rep)
    for (int k = 0; k < max_rows; ++k) {
      const int R = 1 + (k + rep) % max_rows;
      double t[kSections] = {};
      const auto t0 = Clock::now();
      pw.run(toks.data() + prompt, R, prompt, R == 1 ? 1 : R, t);
      const double all = ms_since(t0);
      DenseTimes dt;
      time_dense(*model, pw.scratch(), &pool, R, dt);
      if (rep < 3) continue;
      for (int sct = 0; sct < kSections; ++sct) ts[static_cast<std::size_t>(R)][sct].push_back(t[sct]);
      total[static_cast<std::size_t>(R)].push_back(all);
      td[static_cast<std::size_t>(R)].push_back(dt);
    }
  std::printf("\nPieces (ms, median of %d; sum over the %u layers)\nrows", preps, hp.n_layer);
  for (int sct = 0; sct < kSections; ++sct) std::printf("  %12s", kSectionNames[sct]);
  std::printf("  %12s\n", "total");
  for (int R = 1; R <= max_rows; ++R) {
    std::printf("%4d", R);
    for (int sct = 0; sct < kSections; ++sct) std::printf("  %12.4f", median(ts[static_cast<std::size_t>(R)][sct]));
    std::printf("  %12.4f\n", median(total[static_cast<std::size_t>(R)]));
  }
  std::printf("\nDense maps alone (ms, every layer)\nrows  %12s  %12s  %12s  %12s  %12s\n", "attn proj", "shared exp",
              "router", "1 expert", "output");
  for (int R = 1; R <= max_rows; ++R) {
    const auto& v = td[static_cast<std::size_t>(R)];
    auto med = [&](double DenseTimes::* f) {
      std::vector<double> x;
      for (const auto& e : v) x.push_back(e.*f);
      return median(x);
    };
    std::printf("%4d  %12.4f  %12.4f  %12.4f  %12.4f  %12.4f\n", R, med(&DenseTimes::attn_proj),
                med(&DenseTimes::shared), med(&DenseTimes::router), med(&DenseTimes::expert1),
                med(&DenseTimes::output));
  }
  return 0;
}
