// R-11 low-bit drafter weights (model/drafter_requant.h): the requantized tensors are exactly what the
// quantizer makes of the dequantized source, every other tensor keeps its pointer and bytes, drafts
// still run, the main model is unaffected, and the STRATA_METAL_MTP_Q4/Q5 settings parse strictly.
#define STRATA_TEST_MAIN
#include "check.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "strata/config/settings.h"
#include "strata/engine/runner.h"
#include "strata/model/drafter_requant.h"
#include "strata/quant/dequantize.h"
#include "strata/quant/quantize.h"
#include "test_engine_support.h"

using namespace strata_test;
using strata::model::DrafterRequant;
using strata::model::MtpWeights;
using strata::model::Weight;
using strata::quant::GGMLType;

namespace {

TinyOptions opts(GGMLType t) {
  TinyOptions o;
  o.seed = 33;
  o.ff_shared = 32;  // every requantized row length a multiple of 32
  o.ff = 32;         // (and the routed experts, for a Q8_0 source)
  o.matrix_type = t;
  return o;
}

std::vector<uint8_t> bytes_of(const Weight& w) {
  const auto* p = w.data;
  return std::vector<uint8_t>(p, p + static_cast<std::size_t>(w.rows) * w.row_stride);
}

std::vector<uint8_t> expected(const Weight& src, GGMLType t, strata::quant::QuantMethod m) {
  std::vector<float> f(static_cast<std::size_t>(src.rows * src.cols));
  for (int64_t r = 0; r < src.rows; ++r)
    strata::quant::dequantize_row(src.type, src.row(r), f.data() + r * src.cols, src.cols);
  std::vector<uint8_t> out(static_cast<std::size_t>(src.rows) * strata::quant::row_bytes(t, src.cols));
  strata::quant::quantize_matrix(t, f.data(), src.rows, src.cols, out.data(), m, nullptr);
  return out;
}

std::vector<Weight*> changed(MtpWeights& w) {
  return {&w.block.attn.q,      &w.block.attn.o,    &w.fc_embedding,     &w.fc_hidden,
          &w.block.moe.sh_gate, &w.block.moe.sh_up, &w.block.moe.sh_down};
}
std::vector<Weight*> kept(MtpWeights& w) {
  return {&w.block.attn.k, &w.block.attn.v, &w.block.moe.router, &w.block.moe.sh_gate_inp};
}
std::vector<const float*> kept_f32(const MtpWeights& w) {
  return {w.block.attn.norm,
          w.block.attn.q_norm,
          w.block.attn.k_norm,
          w.block.moe.norm,
          w.block.hc_attn.fn,
          w.block.hc_attn.base,
          w.block.hc_attn.scale,
          w.block.hc_ffn.fn,
          w.block.hc_ffn.base,
          w.block.hc_ffn.scale,
          w.enorm,
          w.hnorm,
          w.head_hc.fn,
          w.head_hc.base,
          w.shared_head_norm};
}

}  // namespace

TEST(requantized_tensors_equal_quantizer_of_dequantized_source) {
  for (GGMLType src_type : {GGMLType::F32, GGMLType::F16}) {
    for (DrafterRequant r : {DrafterRequant::Q4, DrafterRequant::Q5}) {
      const GGMLType t = r == DrafterRequant::Q4 ? GGMLType::Q4_0 : GGMLType::Q5_0;
      const auto method =
          r == DrafterRequant::Q4 ? strata::quant::QuantMethod::Lloyd : strata::quant::QuantMethod::Ggml;
      auto m = tiny_model(opts(src_type));
      MtpWeights& w = *m->mtp;
      std::vector<std::vector<uint8_t>> want, kept_bytes;
      for (Weight* x : changed(w)) want.push_back(expected(*x, t, method));
      std::vector<const uint8_t*> kept_ptr;
      for (Weight* x : kept(w)) {
        kept_ptr.push_back(x->data);
        kept_bytes.push_back(bytes_of(*x));
      }
      const auto f32_before = kept_f32(w);
      const Weight main_q = m->layers[0].attn.q;
      const auto rep = strata::model::requant_drafter(*m, r, nullptr, 5 * 4 * 32);  // slabs of 5 rows
      CHECK_EQ(rep.tensors, 7);
      CHECK(rep.bytes_after < rep.bytes_before);
      CHECK_EQ(m->owned_weights.size(), static_cast<std::size_t>(7));
      auto ch = changed(w);
      for (std::size_t i = 0; i < ch.size(); ++i) {
        CHECK(ch[i]->type == t);
        CHECK_EQ(ch[i]->row_stride, strata::quant::row_bytes(t, ch[i]->cols));
        CHECK(bytes_of(*ch[i]) == want[i]);
      }
      auto kp = kept(w);
      for (std::size_t i = 0; i < kp.size(); ++i) {
        CHECK(kp[i]->data == kept_ptr[i]);
        CHECK(bytes_of(*kp[i]) == kept_bytes[i]);
      }
      CHECK(kept_f32(w) == f32_before);
      CHECK(m->layers[0].attn.q.data == main_q.data);  // the main model is not touched
    }
  }
}

TEST(off_changes_nothing_and_bad_widths_are_refused) {
  auto m = tiny_model(opts(GGMLType::F32));
  const uint8_t* q = m->mtp->block.attn.q.data;
  const auto rep = strata::model::requant_drafter(*m, DrafterRequant::Off, nullptr);
  CHECK_EQ(rep.tensors, 0);
  CHECK(m->mtp->block.attn.q.data == q);
  CHECK(m->owned_weights.empty());
  TinyOptions o = opts(GGMLType::F32);
  o.ff_shared = 16;  // ffn_down_shexp has 16 columns
  auto bad = tiny_model(o);
  CHECK_THROWS(strata::model::requant_drafter(*bad, DrafterRequant::Q4, nullptr));
}

TEST(q4_ggml_requantizes_only_what_is_wider_and_never_refuses) {
  // The default drafter format: ggml's Q4_0 rule on the R-11 set, but only where that saves bytes and the
  // columns allow it; the rest keep their bytes (a model must still load).
  auto m = tiny_model(opts(GGMLType::F32));
  MtpWeights& w = *m->mtp;
  std::vector<std::vector<uint8_t>> want;
  for (Weight* x : changed(w)) want.push_back(expected(*x, GGMLType::Q4_0, strata::quant::QuantMethod::Ggml));
  // A slab of 3 rows' floats: every tensor goes through several slabs, the bytes those of the whole matrix.
  const auto rep = strata::model::requant_drafter(*m, DrafterRequant::Q4Ggml, nullptr, 3 * 4 * 32);
  CHECK_EQ(rep.tensors, 7);
  auto ch = changed(w);
  for (std::size_t i = 0; i < ch.size(); ++i) {
    CHECK(ch[i]->type == GGMLType::Q4_0);
    CHECK(bytes_of(*ch[i]) == want[i]);
  }
  CHECK(std::string(strata::model::drafter_requant_name(DrafterRequant::Q4Ggml)) == "q4-ggml");
  // Already Q4_0: nothing to gain, nothing touched.
  auto q4 = tiny_model(opts(GGMLType::Q4_0));
  const uint8_t* before = q4->mtp->block.attn.q.data;
  CHECK_EQ(strata::model::requant_drafter(*q4, DrafterRequant::Q4Ggml, nullptr).tensors, 0);
  CHECK(q4->mtp->block.attn.q.data == before);
  // 16 columns (ffn_down_shexp): that tensor is skipped where R-11's Q4 refuses the model.
  TinyOptions o = opts(GGMLType::F32);
  o.ff_shared = 16;
  auto odd = tiny_model(o);
  const uint8_t* down = odd->mtp->block.moe.sh_down.data;
  CHECK_EQ(strata::model::requant_drafter(*odd, DrafterRequant::Q4Ggml, nullptr).tensors, 6);
  CHECK(odd->mtp->block.moe.sh_down.data == down);
}

TEST(runner_with_requant_drafts_and_keeps_main_logits) {
  std::vector<int32_t> toks;
  for (int i = 0; i < 14; ++i) toks.push_back((i * 11 + 3) % 61);
  auto go = [&](DrafterRequant r, std::vector<float>& main, std::vector<float>& dlog, std::vector<int32_t>& dt) {
    strata::engine::RunnerConfig c;
    c.n_threads = 2;
    c.max_ctx = 48;
    c.mtp_sink = 2;
    c.mtp_window = 4;
    c.mtp_requant = r;
    strata::engine::Runner run(tiny_model(opts(GGMLType::F32)), c);
    const auto& hp = run.hparams();
    main.assign(hp.n_vocab, 0.0f);
    run.eval(toks.data(), 13, 0, strata::engine::LogitRows::Last, main.data());
    dlog.assign(3 * hp.mtp_vocab, 0.0f);
    dt.assign(3, -1);
    run.mtp_draft(nullptr, toks[13], 12, 3, dlog.data(), dt.data());
  };
  std::vector<float> m0, d0, m4, d4, m5, d5, m0b, d0b;
  std::vector<int32_t> t0, t4, t5, t0b;
  go(DrafterRequant::Off, m0, d0, t0);
  go(DrafterRequant::Off, m0b, d0b, t0b);
  go(DrafterRequant::Q4, m4, d4, t4);
  go(DrafterRequant::Q5, m5, d5, t5);
  CHECK(m0 == m0b && d0 == d0b && t0 == t0b);  // off: deterministic, bit for bit
  CHECK(m4 == m0 && m5 == m0);                 // the main window never reads drafter weights
  double e4 = 0, e5 = 0, n0 = 0;
  for (std::size_t i = 0; i < d0.size(); ++i) {
    CHECK(std::isfinite(d4[i]) && std::isfinite(d5[i]));
    e4 += (d4[i] - d0[i]) * (d4[i] - d0[i]);
    e5 += (d5[i] - d0[i]) * (d5[i] - d0[i]);
    n0 += d0[i] * d0[i];
  }
  CHECK(e4 > 0.0 && e5 > 0.0);  // the drafter really runs the requantized weights
  CHECK_MSG(e5 < e4, "Q5 drafts closer than Q4: " + std::to_string(e5) + " vs " + std::to_string(e4));
  CHECK_MSG(std::sqrt(e4 / n0) < 0.5,
            "q4 rel " + std::to_string(std::sqrt(e4 / n0)) + " q5 rel " + std::to_string(std::sqrt(e5 / n0)));
  for (int32_t t : t4) CHECK(t >= 0 && t < 61);
}

TEST(settings_q4_q5_parse_strictly) {
  using strata::config::parse_settings;
  auto s = parse_settings({{"STRATA_METAL_MTP_Q4", " 1 "}});
  CHECK(s.diagnostics.empty() && s.settings.mtp.q4 && !s.settings.mtp.q5);
  s = parse_settings({{"STRATA_METAL_MTP_Q5", "1"}, {"STRATA_METAL_MTP_Q4", "0"}});
  CHECK(s.diagnostics.empty() && s.settings.mtp.q5 && !s.settings.mtp.q4);
  s = parse_settings({{"STRATA_METAL_MTP_Q4", "1"}, {"STRATA_METAL_MTP_Q5", "1"}, {"STRATA_METAL_MTP_SINK", "8"}});
  CHECK_EQ(s.diagnostics.size(), static_cast<std::size_t>(1));
  CHECK(!s.settings.mtp.q4 && !s.settings.mtp.q5 && s.settings.mtp.sink == 64);  // whole group falls back
  for (const char* bad : {"yes", "true", "2", "", "1.0"}) {
    s = parse_settings({{"STRATA_METAL_MTP_Q5", bad}});
    CHECK_EQ(s.diagnostics.size(), static_cast<std::size_t>(1));
    CHECK(!s.settings.mtp.q5);
  }
  CHECK_THROWS(strata::config::load_settings_strict({{"STRATA_METAL_MTP_Q4", "1"}, {"STRATA_METAL_MTP_Q5", "1"}}));
}
