// The attention core's many-cell kernels (engine/attention_kernels.h): every ISA table bitwise equal
// to the portable one (which is the per-cell formulation: KvCells::dot_k / axpy_v, indexer_score),
// and attend_group / attend_head bitwise equal to the per-cell attention they replaced.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/engine/attention_head.h"
#include "strata/engine/attention_kernels.h"
#include "strata/engine/cell_select.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/vec_dot.h"
#include "strata/util/error.h"
#include "strata/util/fp16.h"
#include "test_quant_util.h"

using namespace strata::engine;
using strata::model::kv_type_name;
using strata::model::KvType;

namespace {

std::vector<float> rnd(std::mt19937& g, std::size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

std::string table_name(const AttnKernels* t) {
#if defined(STRATA_HAVE_AVX512_TU)
  if (t == &attn_kernels_avx512()) return "avx512";
#endif
  return t == &attn_kernels_scalar() ? "scalar" : "avx2";
}

std::vector<const AttnKernels*> tables() {
  std::vector<const AttnKernels*> t = {&attn_kernels_scalar()};
#if defined(STRATA_HAVE_AVX2_TU)
  if (strata::cpu::isa_supported(strata::cpu::Isa::Avx2)) t.push_back(&attn_kernels_avx2());
#endif
#if defined(STRATA_HAVE_AVX512_TU)
  if (strata::cpu::isa_supported(strata::cpu::Isa::Avx512)) t.push_back(&attn_kernels_avx512());
#endif
  return t;
}

// Cells with varied magnitudes, some all-zero (scale 0) and some never written (zeroed by
// prepare_write's gap rule).
KvCells filled_cells(std::mt19937& g, KvType type, int dh, int hkv, int n_cells) {
  KvCells kv(1, n_cells, hkv, dh, type, 0);
  kv.prepare_write(0, 0, n_cells);
  for (int c = 0; c < n_cells; ++c) {
    auto k = rnd(g, static_cast<std::size_t>(hkv * dh), c % 29 == 0 ? 8.0f : 1.0f);
    auto v = rnd(g, static_cast<std::size_t>(hkv * dh), c % 13 == 0 ? 0.01f : 1.0f);
    if (c % 37 == 5) std::fill(k.begin(), k.end(), 0.0f);
    if (c % 41 == 7) std::fill(v.begin(), v.end(), 0.0f);
    kv.write(0, c, k.data(), v.data());
  }
  return kv;
}

// A list with gaps: every cell, every other one, or irregular steps.
std::vector<int32_t> gapped_list(int n_cells, int len, int style) {
  std::vector<int32_t> list;
  for (int c = 0; c < n_cells && static_cast<int>(list.size()) < len; c += style == 0 ? 1 : 1 + (c % 3 == style))
    list.push_back(c);
  return list;
}

// The attention as it was before the many-cell kernels: one cell at a time through KvCells::dot_k
// and axpy_v (kv_dot / kv_axpy), chunked softmax merged max-first.
void attend_head_per_cell(const KvCells& kv, int layer, int kv_head, const float* q, const int32_t* cells, int64_t n,
                          float* out) {
  const int dh = kv.head_dim();
  const float sqrt_dh = std::sqrt(static_cast<float>(dh));
  std::vector<float> scores(static_cast<std::size_t>(n)), chunk_o(static_cast<std::size_t>(dh));
  std::memset(out, 0, sizeof(float) * static_cast<std::size_t>(dh));
  const VecKernels& vk = vec_kernels();
  auto cell = [cells](int64_t i) -> int64_t { return cells ? cells[i] : i; };
  for (int64_t i = 0; i < n; ++i) scores[i] = kv.dot_k(vk, layer, cell(i), kv_head, q) / sqrt_dh;
  float big = -INFINITY;
  for (int64_t i = 0; i < n; ++i) big = std::max(big, scores[i]);
  float denom = 0.0f;
  for (int64_t c0 = 0; c0 < n; c0 += kSoftmaxChunk) {
    const int64_t c1 = std::min(n, c0 + kSoftmaxChunk);
    float m = -INFINITY;
    for (int64_t i = c0; i < c1; ++i) m = std::max(m, scores[i]);
    std::fill(chunk_o.begin(), chunk_o.end(), 0.0f);
    float l = 0.0f;
    for (int64_t i = c0; i < c1; ++i) {
      const float e = exp_f32(scores[i] - m);
      l += e;
      kv.axpy_v(vk, layer, cell(i), kv_head, e, chunk_o.data());
    }
    const float f = exp_f32(m - big);
    denom += f * l;
    for (int j = 0; j < dh; ++j) out[j] += f * chunk_o[j];
  }
  for (int j = 0; j < dh; ++j) out[j] /= denom;
}

}  // namespace

// Scores: G = 1..kMaxHeadGroup, head sizes with in-block tails and a short last block (13, 70,
// 100), lists with gaps and lengths around the 4-cell batch, the implicit list; each table against
// the per-cell dot (scalar kernels) bitwise.
TEST(score_kernels_bitwise_per_cell) {
  std::mt19937 g(41);
  const VecKernels& sv = vec_kernels_scalar();
  for (KvType type : {KvType::Int8, KvType::F32, KvType::F16})
    for (int dh : {13, 64, 70, 100, 128}) {
      const int n_cells = 90;
      KvCells kv = filled_cells(g, type, dh, 2, n_cells);
      const KvHeadData hd = kv.head_data(0, 1);
      const float sqrt_dh = std::sqrt(static_cast<float>(dh));
      for (int G : {1, 2, 3, 4, 5, 6, 7, 16})
        for (int len : {1, 3, 4, 5, 9, 64, 90})
          for (int style : {0, 1, 2}) {
            const bool implicit = style == 2;  // the list 0..n-1 given as nullptr
            const std::vector<int32_t> list = gapped_list(n_cells, len, implicit ? 0 : style);
            const int64_t n = static_cast<int64_t>(list.size());
            auto qv = rnd(g, static_cast<std::size_t>(G * dh), 1.5f);
            const float* q[kMaxHeadGroup];
            for (int h = 0; h < G; ++h) q[h] = qv.data() + h * dh;
            std::vector<float> want(static_cast<std::size_t>(G * n));
            for (int h = 0; h < G; ++h)
              for (int64_t i = 0; i < n; ++i) want[h * n + i] = kv.dot_k(sv, 0, list[i], 1, q[h]) / sqrt_dh;
            // Also asking for the first value chunk's V rows, as attend_group does: the same scores.
            const KvHeadData ahead = asking_for(hd, 0, std::min<int64_t>(n, kSoftmaxChunk));
            for (const AttnKernels* t : tables())
              for (const KvHeadData* h : {&hd, &ahead}) {
                std::vector<float> got(want.size() + 3, 9.0f);
                t->scores_for(type)(*h, q, G, implicit ? nullptr : list.data(), n, sqrt_dh, got.data(), n);
                CHECK_MSG(same_bits(got.data(), want.data(), want.size()),
                          table_name(t) + " " + kv_type_name(type) + " dh " + std::to_string(dh) + " G " +
                              std::to_string(G) + " n " + std::to_string(n) + (h == &ahead ? " ahead" : ""));
                CHECK(got[want.size()] == 9.0f);  // nothing written past G·n
              }
          }
    }
}

// Values of one softmax chunk: weights of all sizes (zeros, tiny, large), G = 1..kMaxHeadGroup,
// head sizes with tails, chunks of 1..64 cells with gaps; each table against the per-cell axpy, also
// when the call asks for the V rows of the list entries after its own (the next chunk's, as
// attend_group's chunks do).
TEST(value_kernels_bitwise_per_cell) {
  std::mt19937 g(43);
  const VecKernels& sv = vec_kernels_scalar();
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  for (KvType type : {KvType::Int8, KvType::F32, KvType::F16})
    for (int dh : {13, 64, 70, 100, 128}) {
      const int n_cells = 140;
      KvCells kv = filled_cells(g, type, dh, 2, n_cells);
      const KvHeadData hd = kv.head_data(0, 0);
      for (int G : {1, 2, 3, 4, 5, 7, 16})
        for (int len : {1, 2, 7, 33, 64})
          for (int style : {0, 1}) {
            const std::vector<int32_t> list = gapped_list(n_cells, len + 40, style);  // 40 entries to ask for
            const int64_t n = std::min<int64_t>(len, static_cast<int64_t>(list.size()));
            const KvHeadData ahead = asking_for(hd, n, static_cast<int64_t>(list.size()) - n);
            const int64_t es = kSoftmaxChunk;
            std::vector<float> e(static_cast<std::size_t>(G * es));
            for (std::size_t i = 0; i < e.size(); ++i) e[i] = i % 11 == 3 ? 0.0f : std::exp(-20.0f * u01(g));
            std::vector<float> want(static_cast<std::size_t>(G * dh), 0.0f);
            for (int h = 0; h < G; ++h)
              for (int64_t i = 0; i < n; ++i) kv.axpy_v(sv, 0, list[i], 0, e[h * es + i], want.data() + h * dh);
            for (const AttnKernels* t : tables())
              for (const KvHeadData* hp : {&hd, &ahead}) {
                std::vector<float> got(want.size(), 5.0f);
                float* co[kMaxHeadGroup];
                for (int h = 0; h < G; ++h) co[h] = got.data() + h * dh;
                t->values_for(type)(*hp, e.data(), es, G, style == 0 ? nullptr : list.data(), n, co);
                CHECK_MSG(same_bits(got.data(), want.data(), want.size()),
                          table_name(t) + " " + kv_type_name(type) + " dh " + std::to_string(dh) + " G " +
                              std::to_string(G) + " n " + std::to_string(n) + (hp == &ahead ? " ahead" : ""));
              }
          }
    }
}

// The AVX-512 table's f32 and fp16 entries (16-lane kernels, passes of four heads, falling back to the
// 8-lane kernels) against the portable table bitwise: every group size 1..16 (whole passes of four and
// remainders of 1-3), Dh 128, 64, 80 and 16 (16-lane scores and values), 144 and 256 (a second
// 128-column value slab and a 16-column tail after one, for G <= 3), 72 (16-lane scores, 8-lane values:
// not a multiple of 16) and 100 (8-lane: not a multiple of 8), lists not a multiple of the 4- or 8-cell
// batch and across the 64-cell value piece, with gaps and implicit, up to the buffer's last cell;
// scores and values, neither writing past its output. Skipped, with a line saying so, on a CPU without
// AVX-512.
TEST(avx512_float_kernels_bitwise_portable) {
#if defined(STRATA_HAVE_AVX512_TU)
  if (!strata::cpu::isa_supported(strata::cpu::Isa::Avx512)) {
    std::printf("avx512_float_kernels_bitwise_portable: this CPU cannot run AVX-512: skipped\n");
    return;
  }
  std::mt19937 g(59);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  const AttnKernels& ref = attn_kernels_scalar();
  const AttnKernels& avx = attn_kernels_avx512();
  for (KvType type : {KvType::F32, KvType::F16})
    for (int dh : {128, 64, 80, 144, 256, 72, 16, 100}) {
      const int n_cells = 200;
      KvCells kv = filled_cells(g, type, dh, 2, n_cells);
      const KvHeadData hd = kv.head_data(0, 1);
      const float sqrt_dh = std::sqrt(static_cast<float>(dh));
      for (int G = 1; G <= kMaxHeadGroup; ++G)
        for (int len : {1, 6, 9, 67, 130, n_cells})
          for (bool implicit : {false, true}) {
            const std::vector<int32_t> list = gapped_list(n_cells, len, implicit ? 0 : 2);
            const int32_t* lp = implicit ? nullptr : list.data();
            const int64_t n = static_cast<int64_t>(list.size());
            const std::string what = std::string(kv_type_name(type)) + " dh " + std::to_string(dh) + " G " +
                                     std::to_string(G) + " n " + std::to_string(n) + (implicit ? " implicit" : " list");
            auto qv = rnd(g, static_cast<std::size_t>(G * dh), 1.5f);
            const float* q[kMaxHeadGroup];
            for (int h = 0; h < G; ++h) q[h] = qv.data() + h * dh;
            std::vector<float> want(static_cast<std::size_t>(G * n)), got(want.size() + 1, 9.0f);
            ref.scores_for(type)(hd, q, G, lp, n, sqrt_dh, want.data(), n);
            avx.scores_for(type)(hd, q, G, lp, n, sqrt_dh, got.data(), n);
            CHECK_MSG(same_bits(got.data(), want.data(), want.size()), "scores " + what);
            CHECK(got[want.size()] == 9.0f);
            // Values over the whole list as one call (pieces of 64 cells inside the kernel).
            std::vector<float> e(static_cast<std::size_t>(G * n));
            for (std::size_t i = 0; i < e.size(); ++i) e[i] = i % 11 == 3 ? 0.0f : std::exp(-20.0f * u01(g));
            std::vector<float> vwant(static_cast<std::size_t>(G * dh), 5.0f), vgot(vwant.size() + 16, 5.0f);
            float *cw[kMaxHeadGroup], *cg[kMaxHeadGroup];
            for (int h = 0; h < G; ++h) {
              cw[h] = vwant.data() + h * dh;
              cg[h] = vgot.data() + h * dh;
            }
            ref.values_for(type)(hd, e.data(), n, G, lp, n, cw);
            avx.values_for(type)(hd, e.data(), n, G, lp, n, cg);
            CHECK_MSG(same_bits(vgot.data(), vwant.data(), vwant.size()), "values " + what);
            for (std::size_t i = vwant.size(); i < vgot.size(); ++i) CHECK_MSG(vgot[i] == 5.0f, "values past " + what);
          }
    }
#else
  std::printf("avx512_float_kernels_bitwise_portable: no AVX-512 translation unit in this build: skipped\n");
#endif
}

// fp16 cells store each value rounded to nearest even (fp32_to_fp16) and read it back exactly; the
// per-cell dot and axpy (the kernels' reference) are the f32 ones over those rounded values; a head
// larger than the stack copy allows is refused.
TEST(f16_cells_round_to_nearest_and_read_back_exactly) {
  std::mt19937 g(61);
  const VecKernels& sv = vec_kernels_scalar();
  const int dh = 100, hkv = 2;
  KvCells kv(2, 8, hkv, dh, KvType::F16, 0);
  CHECK(kv.type() == KvType::F16);
  kv.prepare_write(1, 3, 1);
  auto k = rnd(g, static_cast<std::size_t>(hkv * dh), 3.0f);
  auto v = rnd(g, static_cast<std::size_t>(hkv * dh), 3.0f);
  k[5] = 70000.0f;  // beyond fp16's range: +inf, as a cast to half gives
  v[7] = 1.0e-6f;   // a subnormal in fp16
  // Known roundings (head 1): ties go to the even neighbour; 65519 is the largest value that does not
  // overflow.
  k[dh + 0] = 1.0f + 0x1.0p-11f;
  k[dh + 1] = 1.0f + 3 * 0x1.0p-11f;
  k[dh + 2] = 65519.0f;
  k[dh + 3] = 65520.0f;
  kv.write(1, 3, k.data(), v.data());
  std::vector<float> rk(dh), rv(dh), want_k(dh), want_v(dh);
  for (int h = 0; h < hkv; ++h) {
    kv.read_k(1, 3, h, rk.data());
    kv.read_v(1, 3, h, rv.data());
    for (int i = 0; i < dh; ++i) {
      want_k[i] = strata::fp16_to_fp32(strata::fp32_to_fp16(k[h * dh + i]));
      want_v[i] = strata::fp16_to_fp32(strata::fp32_to_fp16(v[h * dh + i]));
    }
    CHECK(same_bits(rk.data(), want_k.data(), want_k.size()));
    if (h == 0) CHECK(std::isinf(rk[5]) && rk[5] > 0.0f);
    if (h == 1) {
      CHECK(rk[0] == 1.0f);
      CHECK(rk[1] == 1.0f + 0x1.0p-9f);
      CHECK(rk[2] == 65504.0f);
      CHECK(std::isinf(rk[3]));
    }
    CHECK(same_bits(rv.data(), want_v.data(), want_v.size()));
    if (h == 1) {
      auto q = rnd(g, static_cast<std::size_t>(dh));
      const float d = kv.dot_k(sv, 1, 3, h, q.data());
      const float dw = sv.dot_f32(q.data(), want_k.data(), dh);
      CHECK(same_bits(&d, &dw, 1));
      std::vector<float> out(dh, 0.0f), out_w(dh, 0.0f);
      kv.axpy_v(sv, 1, 3, h, 0.25f, out.data());
      sv.axpy_f32(0.25f, want_v.data(), dh, out_w.data());
      CHECK(same_bits(out.data(), out_w.data(), out.size()));
    }
  }
  bool refused = false;
  try {
    KvCells big(1, 4, 1, kMaxF16HeadDim + 8, KvType::F16, 0);
  } catch (const strata::Error&) {
    refused = true;
  }
  CHECK(refused);
}

// Indexer scores over runs of cells: heads 1..5, dims with tails, run lengths around the batch,
// keys giving negative, zero and NaN dots (ReLU takes them to +0); bitwise indexer_score per cell.
TEST(indexer_score_kernel_bitwise_per_cell) {
  std::mt19937 g(47);
  const VecKernels& sv = vec_kernels_scalar();
  for (int heads : {1, 2, 3, 4, 5})
    for (int dim : {7, 29, 32, 64})
      for (int64_t n : {1, 2, 3, 4, 5, 8, 9, 101}) {
        auto q = rnd(g, static_cast<std::size_t>(heads * dim));
        auto w = rnd(g, static_cast<std::size_t>(heads));
        auto keys = rnd(g, static_cast<std::size_t>(n * dim));
        for (int64_t i = 0; i < n; ++i) {
          if (i % 5 == 1) std::fill(keys.begin() + i * dim, keys.begin() + (i + 1) * dim, 0.0f);
          if (i % 7 == 3) keys[static_cast<std::size_t>(i * dim)] = NAN;
        }
        std::vector<float> want(static_cast<std::size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          want[i] = indexer_score(sv, q.data(), w.data(), heads, dim, keys.data() + i * dim);
        for (const AttnKernels* t : tables()) {
          std::vector<float> got(static_cast<std::size_t>(n) + 1, 3.0f);
          t->indexer_scores(q.data(), w.data(), heads, dim, keys.data(), n, got.data());
          CHECK_MSG(same_bits(got.data(), want.data(), want.size()),
                    "heads " + std::to_string(heads) + " dim " + std::to_string(dim) + " n " + std::to_string(n));
          CHECK(got[static_cast<std::size_t>(n)] == 3.0f);
        }
      }
}

// attend_group (and attend_head, its G = 1) on the kernels against the per-cell attention, every
// ISA path, both K/V types, G up to kMaxHeadGroup, lists around the softmax chunk, the implicit list.
TEST(attend_group_bitwise_per_cell_attention) {
  std::mt19937 g(53);
  const std::vector<strata::cpu::Isa> isas = quant_test::runnable_isas();
  const quant_test::IsaGuard restore;
  for (KvType type : {KvType::Int8, KvType::F32, KvType::F16})
    for (int dh : {64, 70}) {
      const int n_cells = 200;
      KvCells kv = filled_cells(g, type, dh, 2, n_cells);
      for (strata::cpu::Isa isa : isas) {
        strata::cpu::force_isa(isa);
        for (int G : {1, 3, 4, 16})
          for (int len : {1, 5, 64, 65, 200}) {
            const bool implicit = len == n_cells;
            const std::vector<int32_t> list = gapped_list(n_cells, len, implicit ? 0 : 1);
            const int32_t* lp = implicit ? nullptr : list.data();
            const int64_t n = static_cast<int64_t>(list.size());
            auto qv = rnd(g, static_cast<std::size_t>(G * dh), 2.0f);
            std::vector<float> want(static_cast<std::size_t>(G * dh)), got(want.size(), 7.0f);
            std::vector<float> sc(static_cast<std::size_t>(G * n)), ch(static_cast<std::size_t>(G * dh));
            const float* qs[kMaxHeadGroup];
            float* outs[kMaxHeadGroup];
            for (int h = 0; h < G; ++h) {
              attend_head_per_cell(kv, 0, 1, qv.data() + h * dh, lp, n, want.data() + h * dh);
              qs[h] = qv.data() + h * dh;
              outs[h] = got.data() + h * dh;
            }
            attend_group(kv, 0, 1, qs, G, lp, n, sc.data(), ch.data(), outs);
            const std::string what = std::string(strata::cpu::isa_name(isa)) + " dh " + std::to_string(dh) + " G " +
                                     std::to_string(G) + " n " + std::to_string(n);
            CHECK_MSG(same_bits(got.data(), want.data(), want.size()), what);
            attend_head(kv, 0, 1, qs[0], lp, n, sc.data(), ch.data(), got.data());
            CHECK_MSG(same_bits(got.data(), want.data(), static_cast<std::size_t>(dh)), what + " attend_head");
          }
      }
    }
}

// attend_rows (a window's or prefill chunk's rows over the implicit list, each key read once for all
// of them) against attend_group row by row: every ISA path, all K/V types, G·T up to kMaxHeadGroup,
// first rows around the softmax chunk and the score kernels' batches of 8 cells.
TEST(attend_rows_bitwise_row_by_row_attend_group) {
  std::mt19937 g(71);
  const std::vector<strata::cpu::Isa> isas = quant_test::runnable_isas();
  const quant_test::IsaGuard restore;
  for (KvType type : {KvType::Int8, KvType::F32, KvType::F16})
    for (int dh : {64, 128}) {
      const int n_cells = 140;
      KvCells kv = filled_cells(g, type, dh, 2, n_cells);
      for (strata::cpu::Isa isa : isas) {
        strata::cpu::force_isa(isa);
        for (int G : {1, 2, 4, 8})
          for (int T : {2, 3, 4, 16})
            for (int n0 : {1, 7, 63, 64, 65, 120}) {
              if (G * T > kMaxHeadGroup || n0 + T - 1 > n_cells) continue;
              const int Q = G * T;
              auto qv = rnd(g, static_cast<std::size_t>(Q * dh), 2.0f);
              std::vector<float> want(static_cast<std::size_t>(Q * dh)), got(want.size(), 7.0f);
              std::vector<float> sc(static_cast<std::size_t>(Q * (n0 + T))), ch(static_cast<std::size_t>(G * dh));
              const float* qs[kMaxHeadGroup];
              float* outs[kMaxHeadGroup];
              float* wants[kMaxHeadGroup];
              for (int i = 0; i < Q; ++i) {
                qs[i] = qv.data() + i * dh;
                outs[i] = got.data() + i * dh;
                wants[i] = want.data() + i * dh;
              }
              for (int t = 0; t < T; ++t)
                attend_group(kv, 0, 1, qs + t * G, G, nullptr, n0 + t, sc.data(), ch.data(), wants + t * G);
              attend_rows(kv, 0, 1, qs, G, T, n0, sc.data(), ch.data(), outs);
              const std::string what = std::string(strata::cpu::isa_name(isa)) + " dh " + std::to_string(dh) + " G " +
                                       std::to_string(G) + " T " + std::to_string(T) + " n0 " + std::to_string(n0);
              CHECK_MSG(same_bits(got.data(), want.data(), want.size()), what);
            }
      }
    }
}
