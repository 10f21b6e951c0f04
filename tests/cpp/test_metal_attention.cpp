// QSA attention kernels (metal/kernels/attention.h) on the emulator:
//   - qsa_prep against the CPU (rms_norm, Rope::apply, kv_quantize): queries, int8 K/V codes and fp16
//     scales byte for byte; the kv_only function constant writes K/V and leaves the queries alone;
//   - the split path (chunks + merge) byte for byte against the CPU attend_head (+ σ(gate));
//   - the fused drafter attention byte for byte against split + merge for widths 1, 31, 64, 65,
//     128, 319, 320, 321, 383, 384 (two tokens except at 384), non-contiguous cell ids, a partial-plane
//     stride other than the token count, at the production shape (24 heads of 256, 2 KV heads);
//     Auto picks the fused kernel up to 384 cells and the split path beyond;
//   - f32 cells (qwen3moe, the _f32 kernels): qsa_prep's K/V floats, the split path and the fused
//     path byte for byte against the CPU's f32 KvCells and attend_head.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "metal/emu/emu_device.h"
#include "metal/host/dispatch.h"
#include "strata/engine/attention_head.h"
#include "strata/engine/kv_cells.h"
#include "strata/engine/kv_quant.h"
#include "strata/engine/ops.h"
#include "strata/engine/rope.h"

using strata::mtl::AttnPath;
using strata::mtl::Buffer;
using strata::mtl::BufferRef;
using strata::mtl::EmuDevice;

namespace {

std::vector<float> rnd(std::mt19937& g, size_t n, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

template <class T>
std::unique_ptr<Buffer> upload(EmuDevice& dev, const std::vector<T>& v) {
  auto b = dev.new_buffer(std::max<size_t>(v.size() * sizeof(T), 16));
  std::memcpy(b->contents(), v.data(), v.size() * sizeof(T));
  return b;
}

bool same(const void* a, const void* b, size_t bytes) { return std::memcmp(a, b, bytes) == 0; }

// A layer's cells, filled from random K/V floats both into the engine's KvCells and, byte for byte
// the same (kv_quantize), into the Metal layout.
struct Cells {
  int n_cells, hkv, dh, nb;
  bool f32;
  strata::engine::KvCells kv;
  std::vector<int8_t> k8, v8;
  std::vector<uint16_t> ks, vs;
  std::vector<float> kf, vf;  // f32 cells (qwen3moe): the floats as written
  Cells(int cells, int heads, int head_dim, std::mt19937& g, bool f32_cells = false)
      : n_cells(cells),
        hkv(heads),
        dh(head_dim),
        nb((head_dim + 63) / 64),
        f32(f32_cells),
        kv(1, cells, heads, head_dim, f32_cells ? strata::model::KvType::F32 : strata::model::KvType::Int8, 0),
        k8(size_t(cells) * heads * head_dim),
        v8(k8.size()),
        ks(size_t(cells) * heads * nb),
        vs(ks.size()) {
    for (int c = 0; c < cells; ++c) {
      const auto k = rnd(g, size_t(heads) * head_dim, 1.5f), v = rnd(g, size_t(heads) * head_dim);
      kv.write(0, c, k.data(), v.data());
      if (f32) {
        kf.insert(kf.end(), k.begin(), k.end());
        vf.insert(vf.end(), v.begin(), v.end());
        continue;
      }
      for (int h = 0; h < heads; ++h) {
        const size_t s = size_t(c) * heads + h;
        strata::engine::kv_quantize(k.data() + h * head_dim, head_dim, &k8[s * head_dim], &ks[s * nb]);
        strata::engine::kv_quantize(v.data() + h * head_dim, head_dim, &v8[s * head_dim], &vs[s * nb]);
      }
    }
  }
};

struct AttnCase {
  int hq, hkv, dh;
  bool gated;
  std::vector<std::vector<int32_t>> lists;  // per row
  uint32_t plane_stride;
};

struct AttnOut {
  std::vector<float> out;
  AttnPath path;
};

AttnOut run_attention(EmuDevice& dev, const Cells& cells, const AttnCase& c, const std::vector<float>& qh,
                      const std::vector<float>& qproj, AttnPath path) {
  const uint32_t rows = static_cast<uint32_t>(c.lists.size());
  uint32_t max_w = 0;
  for (const auto& l : c.lists) max_w = std::max<uint32_t>(max_w, static_cast<uint32_t>(l.size()));
  const uint32_t list_stride = max_w + 3;
  std::vector<int32_t> flat(size_t(rows) * list_stride, -1), n(rows);
  for (uint32_t r = 0; r < rows; ++r) {
    std::copy(c.lists[r].begin(), c.lists[r].end(), flat.begin() + r * list_stride);
    n[r] = static_cast<int32_t>(c.lists[r].size());
  }
  const uint32_t n_chunks = (max_w + 63) / 64 + 1;
  const uint32_t out_stride = uint32_t(c.hq * c.dh) + 5;
  auto bq = upload(dev, qh), bg = upload(dev, qproj);
  auto bk8 = cells.f32 ? upload(dev, cells.kf) : upload(dev, cells.k8), bks = upload(dev, cells.ks);
  auto bv8 = cells.f32 ? upload(dev, cells.vf) : upload(dev, cells.v8), bvs = upload(dev, cells.vs);
  auto bl = upload(dev, flat), bn = upload(dev, n);
  auto bo = dev.new_buffer(size_t(rows) * out_stride * 4);
  auto bpo = dev.new_buffer(size_t(n_chunks) * c.plane_stride * c.hq * c.dh * 4);
  auto bpm = dev.new_buffer(size_t(n_chunks) * c.plane_stride * c.hq * 2 * 4);
  AttnArgs a{};
  a.n_rows = rows;
  a.n_head = uint32_t(c.hq);
  a.n_head_kv = uint32_t(c.hkv);
  a.head_dim = uint32_t(c.dh);
  a.kv_blocks = uint32_t(cells.nb);
  a.list_stride = list_stride;
  a.plane_stride = c.plane_stride;
  a.n_chunks = n_chunks;
  a.q_stride = uint32_t(c.hq * c.dh);
  a.gate_stride = uint32_t(2 * c.hq * c.dh);
  a.gated = c.gated ? 1u : 0u;
  a.out_stride = out_stride;
  a.sqrt_dh = std::sqrt(static_cast<float>(c.dh));
  // f32 cells: the scale buffers stay unbound (the _f32 kernels never read them).
  strata::mtl::AttnBuffers b{BufferRef{bq.get()},
                             BufferRef{bk8.get()},
                             cells.f32 ? BufferRef{} : BufferRef{bks.get()},
                             BufferRef{bv8.get()},
                             cells.f32 ? BufferRef{} : BufferRef{bvs.get()},
                             BufferRef{bl.get()},
                             BufferRef{bn.get()},
                             BufferRef{bg.get()},
                             BufferRef{bo.get()},
                             BufferRef{bpo.get()},
                             BufferRef{bpm.get()}};
  AttnOut r;
  r.path = strata::mtl::encode_attention(dev, a, b, max_w, path,
                                         cells.f32 ? strata::mtl::KvFormat::F32 : strata::mtl::KvFormat::Int8);
  dev.submit();
  r.out.resize(size_t(rows) * c.hq * c.dh);
  const float* o = static_cast<const float*>(bo->contents());
  for (uint32_t row = 0; row < rows; ++row)
    std::memcpy(&r.out[size_t(row) * c.hq * c.dh], o + size_t(row) * out_stride, size_t(c.hq) * c.dh * 4);
  return r;
}

// The CPU engine's attention for the same rows (attention_forward's per-head loop).
std::vector<float> cpu_attention(const Cells& cells, const AttnCase& c, const std::vector<float>& qh,
                                 const std::vector<float>& qproj) {
  const size_t rows = c.lists.size();
  std::vector<float> out(rows * c.hq * c.dh), scores(4096), chunk(c.dh);
  const int group = c.hq / c.hkv;
  for (size_t r = 0; r < rows; ++r)
    for (int h = 0; h < c.hq; ++h) {
      float* o = &out[(r * c.hq + h) * c.dh];
      strata::engine::attend_head(cells.kv, 0, h / group, &qh[(r * c.hq + h) * c.dh], c.lists[r].data(),
                                  static_cast<int64_t>(c.lists[r].size()), scores.data(), chunk.data(), o);
      if (c.gated) {
        const float* gt = &qproj[r * 2 * c.hq * c.dh + 2 * h * c.dh + c.dh];
        for (int i = 0; i < c.dh; ++i) o[i] *= strata::engine::sigmoid(gt[i]);
      }
    }
  return out;
}

// A draft row's list shape: sinks [0, min(sink, first)) then the window [first, last], with holes
// punched in to make the ids non-contiguous; exactly `width` entries, ascending.
std::vector<int32_t> list_of_width(int width, int pool, std::mt19937& g) {
  std::vector<int32_t> all;
  for (int c = 0; c < pool; ++c) all.push_back(c);
  std::shuffle(all.begin(), all.end(), g);
  std::vector<int32_t> l(all.begin(), all.begin() + width);
  std::sort(l.begin(), l.end());
  return l;
}

}  // namespace

TEST(qsa_prep_matches_cpu_byte_for_byte) {
  EmuDevice dev;
  std::mt19937 g(31);
  for (int dh : {16, 64, 80, 128, 256})
    for (int rd : {0, dh / 2, dh})
      for (int gated = 0; gated < 2; ++gated)
        for (int kv_only = 0; kv_only < 2; ++kv_only) {
          const int hq = 6, hkv = 2, rows = 3, nb = (dh + 63) / 64, cell0 = 5, n_cells = 12;
          const int rd_even = rd / 2 * 2;
          const int qrows = hq * dh * (gated ? 2 : 1), kvrows = hkv * dh;
          const auto qp = rnd(g, size_t(rows) * qrows, 2.0f), kp = rnd(g, size_t(rows) * kvrows, 2.0f);
          const auto vp = rnd(g, size_t(rows) * kvrows), qn = rnd(g, dh), kn = rnd(g, dh);
          strata::engine::Rope rope(rd_even, 10000.0f);
          const uint32_t cs_stride = uint32_t(std::max(rd_even, 1));
          std::vector<float> cs(size_t(rows) * cs_stride, 0.0f);
          for (int r = 0; r < rows; ++r)
            if (rd_even > 0) rope.angles(cell0 + r, &cs[size_t(r) * cs_stride]);
          auto bqp = upload(dev, qp), bkp = upload(dev, kp), bvp = upload(dev, vp), bqn = upload(dev, qn),
               bkn = upload(dev, kn), bcs = upload(dev, cs);
          auto bqh = dev.new_buffer(size_t(rows) * hq * dh * 4);
          auto bk8 = dev.new_buffer(size_t(n_cells) * hkv * dh), bks = dev.new_buffer(size_t(n_cells) * hkv * nb * 2);
          auto bv8 = dev.new_buffer(size_t(n_cells) * hkv * dh), bvs = dev.new_buffer(size_t(n_cells) * hkv * nb * 2);
          QsaPrepArgs a{};
          a.n_rows = rows;
          a.n_head = hq;
          a.n_head_kv = hkv;
          a.head_dim = uint32_t(dh);
          a.rope_dim = uint32_t(rd_even);
          a.gated = gated ? 1u : 0u;
          a.q_stride = uint32_t(qrows);
          a.kv_stride = uint32_t(kvrows);
          a.cs_stride = cs_stride;
          a.eps = 1e-6f;
          a.cell0 = cell0;
          a.kv_blocks = uint32_t(nb);
          strata::mtl::QsaBuffers b{BufferRef{bqp.get()}, BufferRef{bkp.get()}, BufferRef{bvp.get()},
                                    BufferRef{bqn.get()}, BufferRef{bkn.get()}, BufferRef{bcs.get()},
                                    BufferRef{bqh.get()}, BufferRef{bk8.get()}, BufferRef{bks.get()},
                                    BufferRef{bv8.get()}, BufferRef{bvs.get()}};
          strata::mtl::encode_qsa_prep(dev, a, b, kv_only != 0);
          dev.submit();
          bool ok = true;
          std::vector<float> x(dh);
          std::vector<int8_t> q8(dh);
          std::vector<uint16_t> sc(nb);
          for (int r = 0; r < rows; ++r) {
            const float* c = &cs[size_t(r) * cs_stride];
            for (int h = 0; h < hq; ++h) {
              const float* src = &qp[size_t(r) * qrows + (gated ? 2 * h * dh : h * dh)];
              strata::engine::rms_norm(src, dh, 1e-6f, qn.data(), x.data());
              if (rd_even > 0) rope.apply(x.data(), c);
              const float* got = static_cast<const float*>(bqh->contents()) + (size_t(r) * hq + h) * dh;
              if (kv_only) {
                uint32_t bits;
                std::memcpy(&bits, got, 4);
                ok = ok && bits == 0xFFFFFFFFu;  // untouched: still the fresh-buffer pattern
              } else {
                ok = ok && same(got, x.data(), size_t(dh) * 4);
              }
            }
            for (int h = 0; h < hkv; ++h) {
              const size_t s = size_t(cell0 + r) * hkv + h;
              strata::engine::rms_norm(&kp[size_t(r) * kvrows + h * dh], dh, 1e-6f, kn.data(), x.data());
              if (rd_even > 0) rope.apply(x.data(), c);
              strata::engine::kv_quantize(x.data(), dh, q8.data(), sc.data());
              ok = ok && same(static_cast<const int8_t*>(bk8->contents()) + s * dh, q8.data(), size_t(dh));
              ok = ok && same(static_cast<const uint16_t*>(bks->contents()) + s * nb, sc.data(), size_t(nb) * 2);
              strata::engine::kv_quantize(&vp[size_t(r) * kvrows + h * dh], dh, q8.data(), sc.data());
              ok = ok && same(static_cast<const int8_t*>(bv8->contents()) + s * dh, q8.data(), size_t(dh));
              ok = ok && same(static_cast<const uint16_t*>(bvs->contents()) + s * nb, sc.data(), size_t(nb) * 2);
            }
          }
          CHECK_MSG(ok, "dh=" + std::to_string(dh) + " rope=" + std::to_string(rd_even) +
                            " gated=" + std::to_string(gated) + " kv_only=" + std::to_string(kv_only));
        }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(split_attention_matches_cpu_attend_head) {
  EmuDevice dev;
  std::mt19937 g(32);
  for (int dh : {16, 80, 128})
    for (int gated = 0; gated < 2; ++gated) {
      const int hq = 6, hkv = 2, pool = 300;
      Cells cells(pool, hkv, dh, g);
      AttnCase c{hq, hkv, dh, gated != 0, {}, 7};
      for (int w : {0, 1, 63, 64, 65, 200, 300}) c.lists.push_back(list_of_width(w, pool, g));
      const auto qh = rnd(g, c.lists.size() * hq * dh), qproj = rnd(g, c.lists.size() * 2 * hq * dh);
      const AttnOut split = run_attention(dev, cells, c, qh, qproj, AttnPath::Split);
      const std::vector<float> cpu = cpu_attention(cells, c, qh, qproj);
      CHECK_MSG(same(split.out.data(), cpu.data(), cpu.size() * 4), "dh=" + std::to_string(dh));
    }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(fused_drafter_attention_is_byte_identical_to_split) {
  EmuDevice dev;
  std::mt19937 g(33);
  const int hq = 24, hkv = 2, dh = 256, pool = 900;  // the production shape: 12 query heads per KV head
  Cells cells(pool, hkv, dh, g);
  int widths_checked = 0;
  for (int w : {1, 31, 64, 65, 128, 319, 320, 321, 383, 384}) {
    AttnCase c{hq, hkv, dh, true, {}, 5};  // partial planes 5 rows apart: not the token count
    const int tokens = w == 384 ? 1 : 2;
    for (int t = 0; t < tokens; ++t) c.lists.push_back(list_of_width(w - t, pool, g));
    const auto qh = rnd(g, c.lists.size() * hq * dh), qproj = rnd(g, c.lists.size() * 2 * hq * dh);
    const AttnOut fused = run_attention(dev, cells, c, qh, qproj, AttnPath::Fused);
    const AttnOut split = run_attention(dev, cells, c, qh, qproj, AttnPath::Split);
    const AttnOut autop = run_attention(dev, cells, c, qh, qproj, AttnPath::Auto);
    CHECK(autop.path == AttnPath::Fused);
    CHECK_MSG(same(fused.out.data(), split.out.data(), split.out.size() * 4), "width " + std::to_string(w));
    CHECK(same(autop.out.data(), fused.out.data(), fused.out.size() * 4));
    if (w == 65 || w == 384) {  // and both are the CPU's bytes
      const std::vector<float> cpu = cpu_attention(cells, c, qh, qproj);
      CHECK(same(split.out.data(), cpu.data(), cpu.size() * 4));
    }
    ++widths_checked;
  }
  CHECK_EQ(widths_checked, 10);
  // Beyond 384 cells Auto falls back to the split path; the fused kernel refuses.
  AttnCase wide{hq, hkv, dh, true, {list_of_width(385, pool, g)}, 1};
  const auto qh = rnd(g, hq * dh), qproj = rnd(g, 2 * hq * dh);
  CHECK(run_attention(dev, cells, wide, qh, qproj, AttnPath::Auto).path == AttnPath::Split);
  CHECK_THROWS(run_attention(dev, cells, wide, qh, qproj, AttnPath::Fused));
  CHECK(strata::mtl::fused_attention_fits(12, 384));
  CHECK(!strata::mtl::fused_attention_fits(12, 385));
  CHECK(!strata::mtl::fused_attention_fits(64, 384));  // scores of 64 heads would not fit
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}

TEST(fused_attention_other_shapes_and_ungated) {
  EmuDevice dev;
  std::mt19937 g(34);
  for (int dh : {16, 80})
    for (int gated = 0; gated < 2; ++gated) {
      const int hq = 8, hkv = 2, pool = 400;
      Cells cells(pool, hkv, dh, g);
      AttnCase c{hq,
                 hkv,
                 dh,
                 gated != 0,
                 {list_of_width(1, pool, g), list_of_width(130, pool, g), list_of_width(384, pool, g)},
                 4};
      const auto qh = rnd(g, 3 * hq * dh), qproj = rnd(g, 3 * 2 * hq * dh);
      const AttnOut fused = run_attention(dev, cells, c, qh, qproj, AttnPath::Fused);
      const AttnOut split = run_attention(dev, cells, c, qh, qproj, AttnPath::Split);
      CHECK(same(fused.out.data(), split.out.data(), split.out.size() * 4));
      CHECK(same(split.out.data(), cpu_attention(cells, c, qh, qproj).data(), split.out.size() * 4));
    }
}

TEST(f32_cells_qsa_prep_and_attention_match_cpu) {
  // qwen3moe's f32 K/V through the _f32 kernels: prep stores the normed, rotated K and the V floats
  // exactly; split and fused attention give the CPU attend_head's bytes.
  EmuDevice dev;
  std::mt19937 g(35);
  for (int dh : {16, 64, 128}) {
    const int hq = 4, hkv = 2, rows = 3, cell0 = 4, n_cells = 9, kvrows = hkv * dh, qrows = hq * dh;
    const auto qp = rnd(g, size_t(rows) * qrows, 2.0f), kp = rnd(g, size_t(rows) * kvrows, 2.0f);
    const auto vp = rnd(g, size_t(rows) * kvrows), qn = rnd(g, dh), kn = rnd(g, dh);
    strata::engine::Rope rope(dh, 1000000.0f);
    std::vector<float> cs(size_t(rows) * dh);
    for (int r = 0; r < rows; ++r) rope.angles(cell0 + r, &cs[size_t(r) * dh]);
    auto bqp = upload(dev, qp), bkp = upload(dev, kp), bvp = upload(dev, vp), bqn = upload(dev, qn),
         bkn = upload(dev, kn), bcs = upload(dev, cs);
    auto bqh = dev.new_buffer(size_t(rows) * hq * dh * 4);
    auto bk = dev.new_buffer(size_t(n_cells) * kvrows * 4), bv = dev.new_buffer(size_t(n_cells) * kvrows * 4);
    QsaPrepArgs a{};
    a.n_rows = rows;
    a.n_head = hq;
    a.n_head_kv = hkv;
    a.head_dim = uint32_t(dh);
    a.rope_dim = uint32_t(dh);
    a.q_stride = uint32_t(qrows);
    a.kv_stride = uint32_t(kvrows);
    a.cs_stride = uint32_t(dh);
    a.eps = 1e-6f;
    a.cell0 = cell0;
    a.kv_blocks = uint32_t((dh + 63) / 64);
    strata::mtl::QsaBuffers b{BufferRef{bqp.get()}, BufferRef{bkp.get()}, BufferRef{bvp.get()}, BufferRef{bqn.get()},
                              BufferRef{bkn.get()}, BufferRef{bcs.get()}, BufferRef{bqh.get()}, BufferRef{bk.get()},
                              BufferRef{},          BufferRef{bv.get()},  BufferRef{}};
    strata::mtl::encode_qsa_prep(dev, a, b, false, strata::mtl::KvFormat::F32);
    dev.submit();
    bool ok = true;
    std::vector<float> x(dh);
    for (int r = 0; r < rows; ++r) {
      const float* c = &cs[size_t(r) * dh];
      for (int h = 0; h < hq; ++h) {
        strata::engine::rms_norm(&qp[size_t(r) * qrows + h * dh], dh, 1e-6f, qn.data(), x.data());
        rope.apply(x.data(), c);
        ok = ok &&
             same(static_cast<const float*>(bqh->contents()) + (size_t(r) * hq + h) * dh, x.data(), size_t(dh) * 4);
      }
      for (int h = 0; h < hkv; ++h) {
        const size_t s = (size_t(cell0 + r) * hkv + h) * dh;
        strata::engine::rms_norm(&kp[size_t(r) * kvrows + h * dh], dh, 1e-6f, kn.data(), x.data());
        rope.apply(x.data(), c);
        ok = ok && same(static_cast<const float*>(bk->contents()) + s, x.data(), size_t(dh) * 4);
        ok =
            ok && same(static_cast<const float*>(bv->contents()) + s, &vp[size_t(r) * kvrows + h * dh], size_t(dh) * 4);
      }
    }
    CHECK_MSG(ok, "f32 qsa_prep, dh=" + std::to_string(dh));
  }
  for (int dh : {16, 80, 128}) {
    const int hq = 8, hkv = 2, pool = 420;
    Cells cells(pool, hkv, dh, g, /*f32_cells=*/true);
    AttnCase c{hq, hkv, dh, false, {}, 6};
    for (int w : {1, 63, 64, 65, 200, 384}) c.lists.push_back(list_of_width(w, pool, g));
    const auto qh = rnd(g, c.lists.size() * hq * dh), qproj = rnd(g, c.lists.size() * 2 * hq * dh);
    const std::vector<float> cpu = cpu_attention(cells, c, qh, qproj);
    const AttnOut split = run_attention(dev, cells, c, qh, qproj, AttnPath::Split);
    const AttnOut fused = run_attention(dev, cells, c, qh, qproj, AttnPath::Fused);
    CHECK_MSG(same(split.out.data(), cpu.data(), cpu.size() * 4), "f32 split, dh=" + std::to_string(dh));
    CHECK_MSG(same(fused.out.data(), cpu.data(), cpu.size() * 4), "f32 fused, dh=" + std::to_string(dh));
    AttnCase wide{hq, hkv, dh, false, {list_of_width(410, pool, g)}, 1};
    const auto qw = rnd(g, hq * dh), pw = rnd(g, 2 * hq * dh);
    const AttnOut sw = run_attention(dev, cells, wide, qw, pw, AttnPath::Auto);
    CHECK(sw.path == AttnPath::Split);
    CHECK(same(sw.out.data(), cpu_attention(cells, wide, qw, pw).data(), sw.out.size() * 4));
  }
  CHECK_EQ(dev.emulator().violation_count(), uint64_t{0});
}
