// The residual path's Metal kernels on the emulator: the hyper-connection combine, generic and
// the (d = 2560, n = 4) fast path, byte for byte against each other and against the CPU hc_combine
// over SPEC §2.3's grid (d ∈ {255, 2560, 2817}, n ∈ {1, 2, 4}, shared expert applied off/on, in place
// off/on, 1..8 tokens, every stream); the RMSNorm of rows against the CPU rms_norm (tolerance: the sum
// of squares is a tree); the hyper-connection coefficients + collapse byte for byte against the CPU.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/dispatch.h"
#include "strata/engine/hc_combine.h"
#include "strata/engine/hyper_connections.h"
#include "strata/engine/ops.h"

using strata::mtl::Buffer;
using strata::mtl::BufferRef;
using strata::mtl::EmuDevice;

namespace {

std::vector<float> rnd(std::mt19937& g, std::size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

std::unique_ptr<Buffer> upload(EmuDevice& dev, const std::vector<float>& v) {
  auto b = dev.new_buffer(std::max<size_t>(v.size(), 1) * 4);
  std::memcpy(b->contents(), v.data(), v.size() * 4);
  return b;
}

[[maybe_unused]] std::vector<float> download(Buffer& b, size_t n) {
  const float* p = static_cast<const float*>(b.contents());
  return std::vector<float>(p, p + n);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST(combine_grid_fast_generic_and_cpu_byte_for_byte) {
  EmuDevice dev;
  std::mt19937 g(11);
  const int K = 10;
  int configs = 0, fast_configs = 0, mismatches = 0;
  for (uint32_t d : {255u, 2560u, 2817u})
    for (uint32_t n : {1u, 2u, 4u})
      for (int apply = 0; apply < 2; ++apply)
        for (int in_place = 0; in_place < 2; ++in_place)
          for (uint32_t tok = 1; tok <= 8; ++tok) {
            ++configs;
            const auto routed = rnd(g, size_t{tok} * K * d), weights = rnd(g, size_t{tok} * K, 0.3f);
            const auto shared = rnd(g, size_t{tok} * d), gate = rnd(g, tok, 0.5f);
            const auto post = rnd(g, size_t{tok} * n), comb = rnd(g, size_t{tok} * n * n, 0.5f);
            const auto x = rnd(g, size_t{tok} * n * d, 2.0f);
            // CPU: the engine's combine (fast path where the shape has one) and its generic path.
            std::vector<float> cpu(x.size()), cpu_generic(x.size());
            strata::engine::CombineArgs ca;
            ca.d = d;
            ca.n = static_cast<int>(n);
            ca.n_tok = static_cast<int>(tok);
            ca.k = K;
            ca.routed = routed.data();
            ca.weights = weights.data();
            ca.shared = apply ? shared.data() : nullptr;
            ca.shared_gate = apply ? gate.data() : nullptr;
            ca.post = post.data();
            ca.comb = comb.data();
            ca.x_in = x.data();
            ca.x_out = cpu.data();
            strata::engine::hc_combine(ca);
            ca.x_out = cpu_generic.data();
            strata::engine::hc_combine_generic(ca);

            auto b_r = upload(dev, routed), b_w = upload(dev, weights), b_s = upload(dev, shared),
                 b_g = upload(dev, gate);
            auto b_p = upload(dev, post), b_c = upload(dev, comb);
            ::CombineArgs a{};
            a.d = d;
            a.n = n;
            a.n_tok = tok;
            a.k = K;
            a.has_shared = apply ? 1u : 0u;
            std::vector<float> out[2];
            const bool fast_shape = strata::mtl::combine_has_fast_path(d, n);
            for (int use_fast = 0; use_fast < 2; ++use_fast) {
              auto b_x = upload(dev, x);
              auto b_o = in_place ? nullptr : dev.new_buffer(x.size() * 4);
              Buffer* outb = in_place ? b_x.get() : b_o.get();
              strata::mtl::CombineBuffers cb{BufferRef{b_r.get()}, BufferRef{b_w.get()}, BufferRef{b_s.get()},
                                             BufferRef{b_g.get()}, BufferRef{b_p.get()}, BufferRef{b_c.get()},
                                             BufferRef{b_x.get()}, BufferRef{outb}};
              strata::mtl::encode_combine(dev, a, cb, use_fast != 0);
              dev.submit();
              out[use_fast] = download(*outb, x.size());
            }
            CHECK(std::string(strata::mtl::combine_kernel(d, n)) ==
                  std::string(fast_shape ? "strata_combine_fast_2560x4" : "strata_combine_generic"));
            if (fast_shape) ++fast_configs;
            const bool ok = same_bits(out[0], cpu_generic) && same_bits(out[1], out[0]) && same_bits(out[1], cpu);
            if (!ok && ++mismatches <= 5)
              std::fprintf(stderr, "combine mismatch d=%u n=%u apply=%d in_place=%d tok=%u\n", d, n, apply, in_place,
                           tok);
          }
  std::printf("metal combine: %d configurations (%d on the 2560x4 fast path), %d byte mismatches\n", configs,
              fast_configs, mismatches);
  CHECK_EQ(configs, 288);
  CHECK_EQ(fast_configs, 32);
  CHECK_EQ(mismatches, 0);
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(rms_rows_against_cpu) {
  EmuDevice dev;
  std::mt19937 g(12);
  for (uint32_t n : {1u, 7u, 64u, 255u, 2560u, 10240u})
    for (int weighted = 0; weighted < 2; ++weighted) {
      const uint32_t rows = 3, in_stride = n + 5, out_stride = n + 2;
      const auto x = rnd(g, size_t{rows} * in_stride, 3.0f), w = rnd(g, n);
      auto bx = upload(dev, x), bw = upload(dev, w);
      auto bo = dev.new_buffer(size_t{rows} * out_stride * 4);
      RmsArgs a{};
      a.n = n;
      a.n_rows = rows;
      a.in_stride = in_stride;
      a.out_stride = out_stride;
      a.eps = 1e-6f;
      a.has_weight = weighted ? 1u : 0u;
      strata::mtl::encode_rms(dev, a, BufferRef{bx.get()}, BufferRef{bw.get()}, BufferRef{bo.get()});
      dev.submit();
      const float* o = static_cast<const float*>(bo->contents());
      std::vector<float> ref(n);
      for (uint32_t r = 0; r < rows; ++r) {
        strata::engine::rms_norm(x.data() + size_t{r} * in_stride, n, 1e-6f, weighted ? w.data() : nullptr, ref.data());
        double worst = 0.0;
        for (uint32_t i = 0; i < n; ++i) {
          const double err = std::fabs(static_cast<double>(o[size_t{r} * out_stride + i]) - ref[i]);
          worst = std::max(worst, err / (std::fabs(static_cast<double>(ref[i])) + 1e-30));
        }
        CHECK(worst <= 2e-6);  // the sum of squares is a tree here, 8 interleaved sums on the CPU
      }
    }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(hc_coefficients_and_collapse_byte_for_byte) {
  EmuDevice dev;
  std::mt19937 g(13);
  for (uint32_t n : {1u, 2u, 4u, 7u})
    for (uint32_t iters : {0u, 1u, 3u, 20u})
      for (int head = 0; head < 2; ++head) {
        const uint32_t d = 300, rows = 3;
        const uint32_t nmix = head ? n : (2 + n) * n;
        const auto mix = rnd(g, size_t{rows} * nmix), scale = rnd(g, 3, 0.7f), base = rnd(g, nmix, 0.5f);
        const auto X = rnd(g, size_t{rows} * n * d);
        auto bm = upload(dev, mix), bs = upload(dev, scale), bb = upload(dev, base), bx = upload(dev, X);
        auto bp = dev.new_buffer(size_t{rows} * n * 4), bc = dev.new_buffer(size_t{rows} * n * n * 4);
        auto bo = dev.new_buffer(size_t{rows} * d * 4);
        HcArgs a{};
        a.n = n;
        a.d = d;
        a.n_rows = rows;
        a.sinkhorn_iters = iters;
        a.eps = 1e-6f;
        a.head = head ? 1u : 0u;
        strata::mtl::encode_hc_collapse(dev, a, BufferRef{bm.get()}, BufferRef{bs.get()}, BufferRef{bb.get()},
                                        BufferRef{bx.get()}, BufferRef{bp.get()}, BufferRef{bc.get()},
                                        BufferRef{bo.get()});
        dev.submit();
        for (uint32_t r = 0; r < rows; ++r) {
          std::vector<float> pre(n), post(n), comb(n * n), out(d);
          if (head)
            strata::engine::hc_head_pre(mix.data() + r * nmix, scale.data(), base.data(), static_cast<int>(n), 1e-6f,
                                        pre.data());
          else
            strata::engine::hc_coefficients(mix.data() + r * nmix, scale.data(), base.data(), static_cast<int>(n),
                                            static_cast<int>(iters), 1e-6f, pre.data(), post.data(), comb.data());
          strata::engine::hc_collapse(X.data() + size_t{r} * n * d, static_cast<int>(n), d, pre.data(), out.data());
          const float* o = static_cast<const float*>(bo->contents()) + size_t{r} * d;
          CHECK(same_bits(out, std::vector<float>(o, o + d)));
          if (!head) {
            CHECK(same_bits(post, std::vector<float>(static_cast<const float*>(bp->contents()) + r * n,
                                                     static_cast<const float*>(bp->contents()) + (r + 1) * n)));
            CHECK(same_bits(comb, std::vector<float>(static_cast<const float*>(bc->contents()) + r * n * n,
                                                     static_cast<const float*>(bc->contents()) + (r + 1) * n * n)));
          }
        }
      }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}
