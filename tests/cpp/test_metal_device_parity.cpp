// Device against device: the same dispatch plan on two implementations of the encoder interface.
// On a Mac built with metal-cpp (STRATA_HAVE_METAL_DEVICE) device B is the GPU (metal-cpp device,
// strata.metallib) and device A the emulator; elsewhere B is a second emulator that runs the fibers
// of every threadgroup in reverse, threadgroups on a pool and dispatches between barriers in reverse,
// which checks this program (and that no result depends on scheduling). What must be bitwise on the
// GPU itself (R-5 fast vs generic, R-6 fused vs split, R-10 four streams vs four GEMVs, results that
// depend only on the lane split) is checked on B alone; B against A within the stated tolerances
// (exactly where both run the same operations: ids, plans, codes). docs/metal.md: "run this first".
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/dispatch.h"
#include "metal/host/metal_model.h"
#include "strata/engine/runner.h"
#include "strata/quant/dequantize.h"
#include "strata/util/thread_pool.h"
#include "test_engine_support.h"
#include "test_quant_util.h"
#if defined(STRATA_HAVE_METAL_DEVICE)
#include "metal/host/metal_device.h"
#endif

using strata::mtl::AttnPath;
using strata::mtl::Buffer;
using strata::mtl::BufferRef;
using strata::mtl::Device;
using strata::mtl::GemvTile;
using strata::quant::GGMLType;

namespace {

[[maybe_unused]] strata::ThreadPool& pool() {
  static strata::ThreadPool p(2);
  return p;
}

Device& device_a() {
  static strata::mtl::EmuDevice d;
  return d;
}

Device& device_b() {
#if defined(STRATA_HAVE_METAL_DEVICE)
  static std::unique_ptr<Device> d = strata::mtl::create_metal_device(STRATA_METALLIB);
  return *d;
#else
  static strata::mtl::EmuDevice d(
      [] {
        strata::emu::Options o;
        o.reverse_order = true;
        o.pool = &pool();
        return o;
      }(),
      true);
  return d;
#endif
}

template <class T>
std::unique_ptr<Buffer> upload(Device& dev, const std::vector<T>& v) {
  auto b = dev.new_buffer(std::max<size_t>(v.size() * sizeof(T), 16));
  std::memcpy(b->contents(), v.data(), v.size() * sizeof(T));
  return b;
}

template <class T>
std::vector<T> download(Buffer& b, size_t n) {
  std::vector<T> v(n);
  std::memcpy(v.data(), b.contents(), n * sizeof(T));
  return v;
}

std::vector<float> rnd(std::mt19937& g, size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST(router_ids_and_weights) {
  std::mt19937 g(41);
  const int E = 256, K = 10, rows = 48;
  std::vector<float> x;
  for (int r = 0; r < rows; ++r) {
    auto p = rnd(g, E, r % 3 == 0 ? 4.0f : 1.0f);  // logits; the kernel softmaxes them
    x.insert(x.end(), p.begin(), p.end());
  }
  std::vector<uint8_t> res(static_cast<size_t>(rows) * E);
  for (auto& v : res) v = (g() % 3) == 0;
  for (float b : {1.0f, 2.0f, std::exp(0.85f)})
    for (int prot : {0, 2, 5}) {
      RouteArgs a{};
      a.n_rows = rows;
      a.n_experts = E;
      a.k = K;
      a.row_stride = E;
      a.resident_bonus = b;
      a.rank1_scale = 2.0f;
      a.protect = prot;
      a.draft = 1;
      a.draft_from_row = rows / 2;
      a.has_resident = 1;
      a.resident_stride = E;
      a.softmax = 1;
      std::vector<int32_t> ids[2];
      std::vector<float> w[2];
      for (int which = 0; which < 2; ++which) {
        Device& dev = which ? device_b() : device_a();
        auto bx = upload(dev, x), br = upload(dev, res);
        auto bi = dev.new_buffer(rows * K * 4), bw = dev.new_buffer(rows * K * 4), bs = dev.new_buffer(rows * 4);
        strata::mtl::encode_route(dev, a, BufferRef{bx.get()}, BufferRef{br.get()}, BufferRef{bi.get()},
                                  BufferRef{bw.get()}, BufferRef{bs.get()});
        dev.submit();
        ids[which] = download<int32_t>(*bi, rows * K);
        w[which] = download<float>(*bw, rows * K);
      }
      CHECK(ids[0] == ids[1]);
      double worst = 0.0;
      for (size_t i = 0; i < w[0].size(); ++i) worst = std::max(worst, std::fabs(double(w[0][i]) - w[1][i]));
      CHECK(worst <= 2e-7);
    }
}

TEST(plans_identical) {
  std::mt19937 g(42);
  for (int t = 0; t < 30; ++t) {
    const int E = 1 + static_cast<int>(g() % 512), k = 1 + static_cast<int>(g() % std::min(10, E));
    const int rows = 1 + static_cast<int>(g() % (t % 3 ? 64 : 4));
    std::vector<int32_t> ids(static_cast<size_t>(rows) * k);
    for (auto& v : ids) v = static_cast<int32_t>(g() % static_cast<unsigned>(E));
    std::vector<uint8_t> res(static_cast<size_t>(E));
    for (auto& v : res) v = g() & 1;
    std::vector<int32_t> out[2];
    for (int which = 0; which < 2; ++which) {
      Device& dev = which ? device_b() : device_a();
      const size_t n = ids.size();
      auto bi = upload(dev, ids), br = upload(dev, res);
      auto bh = dev.new_buffer(sizeof(PlanHeader)), bge = dev.new_buffer((n + 1) * 4),
           bgo = dev.new_buffer((n + 2) * 4);
      auto bse = dev.new_buffer(n * 4), bes = dev.new_buffer(n * 4);
      PlanArgs a{static_cast<uint32_t>(n), static_cast<uint32_t>(k), static_cast<uint32_t>(E), 1};
      strata::mtl::encode_plan(dev, a, BufferRef{bi.get()}, BufferRef{br.get()}, BufferRef{bh.get()},
                               BufferRef{bge.get()}, BufferRef{bgo.get()}, BufferRef{bse.get()}, BufferRef{bes.get()});
      dev.submit();
      const PlanHeader h = *static_cast<const PlanHeader*>(bh->contents());
      out[which] = {static_cast<int32_t>(h.n_groups), static_cast<int32_t>(h.n_resident_groups),
                    static_cast<int32_t>(h.n_resident_slots), h.bad_entry};
      for (auto& v : {download<int32_t>(*bge, h.n_groups), download<int32_t>(*bgo, h.n_groups + 1),
                      download<int32_t>(*bse, n), download<int32_t>(*bes, n)})
        out[which].insert(out[which].end(), v.begin(), v.end());
    }
    CHECK(out[0] == out[1]);
  }
}

TEST(combine_fast_equals_generic_on_b_and_b_equals_a) {
  std::mt19937 g(43);
  const uint32_t d = 2560, n = 4, tok = 3, K = 10;
  const auto routed = rnd(g, size_t{tok} * K * d), weights = rnd(g, size_t{tok} * K, 0.3f),
             shared = rnd(g, size_t{tok} * d);
  const auto gate = rnd(g, tok), post = rnd(g, tok * n), comb = rnd(g, size_t{tok} * n * n),
             x = rnd(g, size_t{tok} * n * d);
  std::vector<float> out[3];
  for (int run = 0; run < 3; ++run) {
    Device& dev = run == 0 ? device_a() : device_b();
    auto b_r = upload(dev, routed), b_w = upload(dev, weights), b_s = upload(dev, shared), b_g = upload(dev, gate);
    auto b_p = upload(dev, post), b_c = upload(dev, comb), b_x = upload(dev, x);
    auto b_o = dev.new_buffer(x.size() * 4);
    CombineArgs a{d, n, tok, K, 1};
    strata::mtl::encode_combine(
        dev, a,
        strata::mtl::CombineBuffers{BufferRef{b_r.get()}, BufferRef{b_w.get()}, BufferRef{b_s.get()},
                                    BufferRef{b_g.get()}, BufferRef{b_p.get()}, BufferRef{b_c.get()},
                                    BufferRef{b_x.get()}, BufferRef{b_o.get()}},
        run != 2);
    dev.submit();
    out[run] = download<float>(*b_o, x.size());
  }
  CHECK(same(out[1], out[2]));  // R-5 on device B: fast path == generic path
  CHECK(same(out[0], out[1]));  // separate multiplies and adds: the same bits on both devices
}

TEST(gemv_formats_tiles_and_four_streams) {
  std::mt19937 g(44);
  for (GGMLType t : quant_test::all_types()) {
    if (!strata::mtl::gemv_supported(t)) continue;  // formats the CPU alone runs
    const uint32_t rows = 40, cols = 512, nx = 4;
    const auto bytes = quant_test::random_rows(t, rows, cols, g);
    const uint32_t rb = static_cast<uint32_t>(strata::quant::row_bytes(t, cols));
    std::vector<float> deq(size_t{rows} * cols);
    for (uint32_t r = 0; r < rows; ++r)
      strata::quant::dequantize_row(t, bytes.data() + size_t{r} * rb, &deq[size_t{r} * cols], cols);
    const auto X = rnd(g, size_t{nx} * cols);
    auto run = [&](Device& dev, const GemvTile& tile, uint32_t n_act, size_t x_off) {
      auto bw = upload(dev, bytes),
           bx = upload(dev, std::vector<float>(X.begin() + x_off, X.begin() + x_off + n_act * cols));
      auto by = dev.new_buffer(size_t{n_act} * rows * 4);
      strata::mtl::GemvCall c;
      c.type = t;
      c.W = BufferRef{bw.get()};
      c.rows = rows;
      c.cols = cols;
      c.row_bytes = rb;
      c.X = BufferRef{bx.get()};
      c.nx = n_act;
      c.x_stride = cols;
      c.Y = BufferRef{by.get()};
      c.y_stride = rows;
      strata::mtl::encode_gemv(dev, c, tile);
      dev.submit();
      return download<float>(*by, size_t{n_act} * rows);
    };
    const GemvTile t32{32, 1, 4, 4}, t32b{32, 2, 2, 8}, t16{16, 2, 4, 4};
    const auto a = run(device_a(), t32, nx, 0), b = run(device_b(), t32, nx, 0);
    CHECK_MSG(same(b, run(device_b(), t32b, nx, 0)), strata::quant::type_name(t));  // only L changes the bits
    std::vector<float> singles;
    for (uint32_t s = 0; s < nx; ++s) {
      const auto y = run(device_b(), t32, 1, size_t{s} * cols);
      singles.insert(singles.end(), y.begin(), y.end());
    }
    CHECK_MSG(same(b, singles), strata::quant::type_name(t));  // R-10 on device B
    double worst = 0.0;
    for (uint32_t i = 0; i < nx; ++i)
      for (uint32_t r = 0; r < rows; ++r) {
        double mag = 0.0;
        for (uint32_t j = 0; j < cols; ++j)
          mag += std::fabs(double(deq[size_t{r} * cols + j]) * X[size_t{i} * cols + j]);
        const double bound = 2.0 * 64 * std::ldexp(1.0, -24) * mag + 1e-30;
        worst = std::max(worst, std::fabs(double(a[size_t{i} * rows + r]) - b[size_t{i} * rows + r]) / bound);
      }
    CHECK_MSG(worst <= 1.0, strata::quant::type_name(t));
    (void)t16;
  }
}

TEST(fused_attention_equals_split_on_b) {
  std::mt19937 g(45);
  const uint32_t hq = 24, hkv = 2, dh = 256, nb = 4, pool_cells = 600;
  std::vector<int8_t> k8(size_t{pool_cells} * hkv * dh), v8(k8.size());
  std::vector<uint16_t> ks(size_t{pool_cells} * hkv * nb), vs(ks.size());
  for (auto& v : k8) v = static_cast<int8_t>(static_cast<int>(g() % 255) - 127);
  for (auto& v : v8) v = static_cast<int8_t>(static_cast<int>(g() % 255) - 127);
  for (auto& v : ks) v = strata::fp32_to_fp16(0.001f + 0.01f * static_cast<float>(g() % 100) / 100.0f);
  for (auto& v : vs) v = strata::fp32_to_fp16(0.001f + 0.01f * static_cast<float>(g() % 100) / 100.0f);
  for (uint32_t w : {1u, 31u, 64u, 65u, 128u, 319u, 320u, 321u, 383u, 384u}) {
    const uint32_t rows = w == 384 ? 1 : 2, list_stride = 400;
    std::vector<int32_t> lists(size_t{rows} * list_stride, 0), n(rows);
    for (uint32_t r = 0; r < rows; ++r) {
      std::vector<int32_t> all(pool_cells);
      for (uint32_t c = 0; c < pool_cells; ++c) all[c] = static_cast<int32_t>(c);
      std::shuffle(all.begin(), all.end(), g);
      all.resize(w - r);
      std::sort(all.begin(), all.end());
      std::copy(all.begin(), all.end(), lists.begin() + r * list_stride);
      n[r] = static_cast<int32_t>(w - r);
    }
    const auto qh = rnd(g, size_t{rows} * hq * dh), qp = rnd(g, size_t{rows} * 2 * hq * dh);
    std::vector<float> out[3];
    for (int run = 0; run < 3; ++run) {
      Device& dev = run == 0 ? device_a() : device_b();
      auto bq = upload(dev, qh), bg = upload(dev, qp), bk = upload(dev, k8), bks = upload(dev, ks),
           bv = upload(dev, v8);
      auto bvs = upload(dev, vs), bl = upload(dev, lists), bn = upload(dev, n);
      auto bo = dev.new_buffer(size_t{rows} * hq * dh * 4), bpo = dev.new_buffer(size_t{7} * 5 * hq * dh * 4),
           bpm = dev.new_buffer(size_t{7} * 5 * hq * 2 * 4);
      AttnArgs a{};
      a.n_rows = rows;
      a.n_head = hq;
      a.n_head_kv = hkv;
      a.head_dim = dh;
      a.kv_blocks = nb;
      a.list_stride = list_stride;
      a.plane_stride = 5;
      a.n_chunks = 7;
      a.q_stride = hq * dh;
      a.gate_stride = 2 * hq * dh;
      a.gated = 1;
      a.out_stride = hq * dh;
      a.sqrt_dh = 16.0f;
      strata::mtl::encode_attention(
          dev, a,
          strata::mtl::AttnBuffers{BufferRef{bq.get()}, BufferRef{bk.get()}, BufferRef{bks.get()}, BufferRef{bv.get()},
                                   BufferRef{bvs.get()}, BufferRef{bl.get()}, BufferRef{bn.get()}, BufferRef{bg.get()},
                                   BufferRef{bo.get()}, BufferRef{bpo.get()}, BufferRef{bpm.get()}},
          w, run == 2 ? AttnPath::Split : AttnPath::Fused);
      dev.submit();
      out[run] = download<float>(*bo, size_t{rows} * hq * dh);
    }
    CHECK_MSG(same(out[1], out[2]), "R-6 on device B, width " + std::to_string(w));
    double worst = 0.0;
    for (size_t i = 0; i < out[0].size(); ++i)
      worst = std::max(worst, std::fabs(double(out[0][i]) - out[1][i]) / (std::fabs(double(out[0][i])) + 1e-3));
    CHECK_MSG(worst <= 1e-5, "device A vs B, width " + std::to_string(w));
  }
}

TEST(tiny_model_greedy_tokens_equal_cpu_on_b) {
  strata_test::TinyOptions o;
  o.seed = 9;
  strata::engine::RunnerConfig rc;
  rc.n_threads = 1;
  rc.max_ctx = 64;
  rc.encode_mtp = false;
  strata::engine::Runner cpu(strata_test::tiny_model(o), rc);
  auto model = strata_test::tiny_model(o);
  strata::mtl::MetalModelConfig mc;
  mc.max_rows = 4;
  mc.max_ctx = 64;
  const auto metal_seq = strata::mtl::metal_sequence(device_b(), *model, mc, {});
  strata::engine::Sequence& metal = *metal_seq;
  const int V = static_cast<int>(cpu.hparams().n_vocab);
  std::vector<int32_t> prompt = {1, 5, 9, 2, 7, 30, 11};
  std::vector<float> lc(static_cast<size_t>(V)), lm(static_cast<size_t>(V));
  cpu.eval(prompt.data(), 7, 0, strata::engine::LogitRows::Last, lc.data());
  metal.eval(prompt.data(), 7, 0, lm.data());
  std::vector<int32_t> tc, tm;
  for (int s = 0; s < 12; ++s) {
    int32_t a = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
    int32_t b = static_cast<int32_t>(std::max_element(lm.begin(), lm.end()) - lm.begin());
    tc.push_back(a);
    tm.push_back(b);
    cpu.eval(&a, 1, 7 + s, strata::engine::LogitRows::Last, lc.data());
    metal.eval(&b, 1, 7 + s, lm.data());
  }
  CHECK(tc == tm);
}
