// Emulator entry points: one thin wrapper per kernel, the C++ twin of the .metal entry points in
// metal/kernels/*.metal (same names, same buffer / threadgroup indices, same function constants).
#include "metal/emu/kernels_emu.h"

#include <cstring>
#include <iterator>

// Kernel bodies in C++ (msl_compat.h maps the MSL spellings onto the emulator).
#include "metal/kernels/msl_compat.h"
#include "metal/kernels/attention.h"
#include "metal/kernels/cells.h"
#include "metal/kernels/combine.h"
#include "metal/kernels/gemv.h"
#include "metal/kernels/moe.h"
#include "metal/kernels/norm.h"
#include "metal/kernels/plan.h"
#include "metal/kernels/router.h"
#include "metal/kernels/msl_compat_end.h"

namespace strata::emu {
namespace {

inline const EmuBinding& B(const void* c) { return *static_cast<const EmuBinding*>(c); }
template <class T>
inline tg_ptr<T> TG(int i) {
  return threadgroup_arg<T>(i);
}

void route_rows(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  route_rows_body(b.arg<RouteArgs>(0), b.ptr<const float>(1), b.ptr<const uchar>(2), b.ptr<int>(3), b.ptr<float>(4),
                  b.ptr<int>(5), TG<float>(0), kpos_of(p));
}

void plan(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  plan_body(b.arg<PlanArgs>(0), b.ptr<const int>(1), b.ptr<const uchar>(2), b.ptr<PlanHeader>(3), b.ptr<int>(4),
            b.ptr<int>(5), b.ptr<int>(6), b.ptr<int>(7), TG<uint>(0), TG<uint>(1), TG<uint>(2), TG<uint>(3),
            kpos_of(p));
}

void combine_generic(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  combine_generic_body(b.arg<CombineArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<const float>(3),
                       b.ptr<const float>(4), b.ptr<const float>(5), b.ptr<const float>(6), b.ptr<const float>(7),
                       b.ptr<float>(8), kpos_of(p));
}

void combine_fast_2560x4(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  combine_fast_body<kCombineFastN, kCombineFastD>(
      b.arg<CombineArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<const float>(3), b.ptr<const float>(4),
      b.ptr<const float>(5), b.ptr<const float>(6), b.ptr<const float>(7), b.ptr<float>(8), kpos_of(p));
}

void rms_rows(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  rms_rows_body(b.arg<RmsArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<float>(3), TG<float>(0),
                kpos_of(p));
}

void hc_collapse(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  hc_collapse_body(b.arg<HcArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<const float>(3),
                   b.ptr<const float>(4), b.ptr<float>(5), b.ptr<float>(6), b.ptr<float>(7), TG<float>(0), kpos_of(p));
}

template <class F>
void gemv(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  gemv_body<F>(b.arg<GemvArgs>(0), b.ptr<const uchar>(1), b.ptr<const float>(2), b.ptr<float>(3), b.fc[0], b.fc[1],
               b.fc[2], kpos_of(p));
}

template <class F>
void get_rows(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  get_rows_body<F>(b.arg<GemvArgs>(0), b.ptr<const uchar>(1), b.ptr<const int>(2), b.ptr<float>(3), kpos_of(p));
}

template <class Kv>
void qsa_prep(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  qsa_prep_body<Kv>(b.arg<QsaPrepArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<const float>(3),
                    b.ptr<const float>(4), b.ptr<const float>(5), b.ptr<const float>(6), b.ptr<float>(7),
                    b.ptr<uchar>(8), b.ptr<ushort>(9), b.ptr<uchar>(10), b.ptr<ushort>(11), b.fc_bool(0), kpos_of(p));
}

template <class Kv>
void attn_chunks(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  attn_chunks_body<Kv>(b.arg<AttnArgs>(0), b.ptr<const float>(1), b.ptr<const uchar>(2), b.ptr<const ushort>(3),
                       b.ptr<const uchar>(4), b.ptr<const ushort>(5), b.ptr<const int>(6), b.ptr<const int>(7),
                       b.ptr<float>(8), b.ptr<float>(9), TG<float>(0), TG<float>(1), kpos_of(p));
}

void attn_merge(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  attn_merge_body(b.arg<AttnArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<const int>(3),
                  b.ptr<const float>(4), b.ptr<float>(5), kpos_of(p));
}

template <class Kv>
void attn_fused(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  attn_fused_body<Kv>(b.arg<AttnArgs>(0), b.ptr<const float>(1), b.ptr<const uchar>(2), b.ptr<const ushort>(3),
                      b.ptr<const uchar>(4), b.ptr<const ushort>(5), b.ptr<const int>(6), b.ptr<const int>(7),
                      b.ptr<const float>(8), b.ptr<float>(9), TG<float>(0), TG<float>(1), kpos_of(p));
}

template <class F>
void moe_gemv(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  moe_gemv_body<F>(b.arg<GemvArgs>(0), b.ptr<const uchar>(1), b.ptr<const float>(2), b.ptr<float>(3),
                   b.ptr<const PlanHeader>(4), b.ptr<const int>(5), b.ptr<const int>(6), b.ptr<const int>(7), b.fc[0],
                   b.fc[1], b.fc[2], kpos_of(p));
}

void elementwise(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  elementwise_body(b.arg<EwArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<float>(3), kpos_of(p));
}

void indexer_scores(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  indexer_scores_body(b.arg<CellArgs>(0), b.ptr<const float>(1), b.ptr<const float>(2), b.ptr<const float>(3),
                      b.ptr<float>(4), kpos_of(p));
}

void select_cells(const void* c, const ThreadPos& p) {
  const EmuBinding& b = B(c);
  select_cells_body(b.arg<CellArgs>(0), b.ptr<const float>(1), b.ptr<int>(2), b.ptr<int>(3), TG<uint>(0), TG<uint>(1),
                    kpos_of(p));
}

struct Entry {
  const char* name;
  KernelFn fn;
};

const Entry kEntries[] = {
    {"strata_route_rows", &route_rows},
    {"strata_plan", &plan},
    {"strata_combine_generic", &combine_generic},
    {"strata_combine_fast_2560x4", &combine_fast_2560x4},
    {"strata_rms_rows", &rms_rows},
    {"strata_hc_collapse", &hc_collapse},
    {"strata_qsa_prep", &qsa_prep<KvI8>},
    {"strata_qsa_prep_f32", &qsa_prep<KvF32>},
    {"strata_attn_chunks", &attn_chunks<KvI8>},
    {"strata_attn_chunks_f32", &attn_chunks<KvF32>},
    {"strata_attn_merge", &attn_merge},
    {"strata_attn_fused", &attn_fused<KvI8>},
    {"strata_attn_fused_f32", &attn_fused<KvF32>},
    {"strata_elementwise", &elementwise},
    {"strata_indexer_scores", &indexer_scores},
    {"strata_select_cells", &select_cells},
#define STRATA_EMU_FORMAT(suffix, F)                                            \
  {"strata_gemv_" suffix, &gemv<F>}, {"strata_get_rows_" suffix, &get_rows<F>}, \
      {"strata_moe_gemv_" suffix, &moe_gemv<F>},
    STRATA_EMU_FORMAT("f32", FmtF32) STRATA_EMU_FORMAT("f16", FmtF16) STRATA_EMU_FORMAT("bf16", FmtBF16)
        STRATA_EMU_FORMAT("q8_0", FmtQ8_0) STRATA_EMU_FORMAT("q4_0", FmtQ4_0) STRATA_EMU_FORMAT("q5_0", FmtQ5_0)
            STRATA_EMU_FORMAT("q5_1", FmtQ5_1) STRATA_EMU_FORMAT("q4_k", FmtQ4_K) STRATA_EMU_FORMAT("q6_k", FmtQ6_K)
                STRATA_EMU_FORMAT("q2_k", FmtQ2_K) STRATA_EMU_FORMAT("iq4_xs", FmtIQ4_XS)
                    STRATA_EMU_FORMAT("iq4_nl", FmtIQ4_NL) STRATA_EMU_FORMAT("q3_k", FmtQ3_K)
                        STRATA_EMU_FORMAT("q5_k", FmtQ5_K) STRATA_EMU_FORMAT("iq2_xs", FmtIQ2_XS)
                            STRATA_EMU_FORMAT("iq3_xxs", FmtIQ3_XXS) STRATA_EMU_FORMAT("iq2_xxs", FmtIQ2_XXS)
                                STRATA_EMU_FORMAT("iq3_s", FmtIQ3_S) STRATA_EMU_FORMAT("iq2_s", FmtIQ2_S)
                                    STRATA_EMU_FORMAT("iq1_s", FmtIQ1_S) STRATA_EMU_FORMAT("iq1_m", FmtIQ1_M)
#undef STRATA_EMU_FORMAT
};

}  // namespace

KernelFn find_kernel(const char* name) {
  for (const Entry& e : kEntries)
    if (std::strcmp(e.name, name) == 0) return e.fn;
  return nullptr;
}

std::vector<const char*> kernel_names() {
  std::vector<const char*> v;
  for (const Entry& e : kEntries) v.push_back(e.name);
  return v;
}

}  // namespace strata::emu
