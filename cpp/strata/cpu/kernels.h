#pragma once
// Dot kernels per weight format and ISA. A kernel multiplies rows of one weight format with an
// activation row that was first converted to the kernel's activation form:
//   F32 / F16 / BF16 weights      -> f32 activations, used as given (f32 arithmetic)
//   Q4_0 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL -> Q8_0 activation blocks (32 values, fp16 scale, int8)
//   Q2_K / Q4_K / Q6_K / IQ4_XS   -> Q8_K activation blocks (256 values, f32 scale, int8, sums)
// as ggml does. The integer part of a block dot is exact on every ISA; ISAs differ only in the
// order of the f32 accumulation. Activation quantization is bitwise identical on every ISA.
//
// Per row, a kernel's result does not depend on nrows or on which rows share a call, so any row
// split (threads, gemm tiles) gives bitwise the same y — a split whose pieces start at multiples
// of the kernel's row_align.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "strata/cpu/features.h"
#include "strata/quant/types.h"

namespace strata::cpu {

// out[r] = dot(row r of w, act) for r < nrows; rows are w_stride bytes apart, n elements each.
using DotRowsFn = void (*)(int64_t n, const void* w, std::size_t w_stride, int64_t nrows, const void* act, float* out);
// Several activation rows against the same weight rows: outs[a][r] = dot(row r of w, acts[a]) for
// a < nact, r < nrows. Each weight block is loaded (and unpacked) once for all activations; every
// (row, activation) result is bitwise what dot_rows gives for that activation alone.
using DotRowsMultiFn = void (*)(int64_t n, const void* w, std::size_t w_stride, int64_t nrows, const void* const* acts,
                                int nact, float* const* outs);
// x (n floats) -> activation form (row_bytes(act_type, n) bytes).
using QuantizeActFn = void (*)(const float* x, void* act, int64_t n);

struct DotKernel {
  quant::GGMLType act_type;    // F32, Q8_0 or Q8_K
  QuantizeActFn quantize_act;  // nullptr when act_type is F32 (x is used as is)
  DotRowsFn dot_rows;
  DotRowsMultiFn dot_rows_multi;  // nullptr: dot_rows once per activation
  // Calls must start at a row index that is a multiple of this (16 for the repacked types, whose
  // rows are interleaved in groups: cpu/repack/layout.h); 1 for every plain type.
  int row_align = 1;
  // Activations a several-activation call takes at most (0: act_group()). The IQ kernels take
  // kMaxActGroup: decoding their blocks is most of their work, and each call decodes once for all.
  int max_acts = 0;
};

// rows rounded up to a multiple of k.row_align: the row-block size a splitter may use.
inline int64_t aligned_rows(const DotKernel& k, int64_t rows) {
  return (rows + k.row_align - 1) / k.row_align * k.row_align;
}

// Activation rows a multi-activation call should take at once (callers group up to this many; the
// results never depend on the grouping): 16 — one full tile of activations — while the AMX kernels are
// on (on the Xeon's engine call shape 16 gave the tiles 1.43x of AVX-512 where 8 gave 1.16x:
// docs/benchmarks.md, "AMX tiles"), else 8.
inline constexpr int64_t kMaxActGroup = 16;
int64_t act_group();

// outs[a][r] for a < nact through k.dot_rows_multi when the kernel has one, else dot_rows per
// activation (same results either way).
void dot_rows_acts(const DotKernel& k, int64_t n, const void* w, std::size_t w_stride, int64_t nrows,
                   const void* const* acts, int nact, float* const* outs);

// Whether k's several-activation calls read each weight row once for all of the call's activations
// and set up each activation once per call: the repacked kernels (row_align 16) that have a
// dot_rows_multi walk their 16-row groups one at a time for all activations, and the Q4_0_R16 /
// Q5_0_R16 / Q8_0_R16 ones form each activation's block terms (−bias·Σy, the scale as f32) once per call with more
// than one group (the AMX ones prepare their activation tiles once per call).
inline bool reads_rows_once_per_call(const DotKernel& k) { return k.row_align > 1 && k.dot_rows_multi != nullptr; }

// Weight rows per kernel call when nx activation rows multiply nrows rows of k (w_stride bytes
// apart) in calls of at most `group` activations (act_group()): every row in one call for one activation, and
// for a kernel that reads its rows once per call (above) while the activations fit one call — handing
// such a kernel 16 rows at a time set its activations up again for every group (docs/benchmarks.md,
// "Result, session 44"). Otherwise tiles of about kActTileBytes of weights in whole row_align groups,
// so that a tile stays in L2 (most of it where the L2 is 256 KiB) while each group of activations,
// or each activation of a kernel without dot_rows_multi, passes over it.
inline constexpr std::size_t kActTileBytes = 256 * 1024;
int64_t act_tile_rows(const DotKernel& k, std::size_t w_stride, int64_t nrows, int64_t nx, int64_t group);

// call(r0, rows, i0, na) for each kernel call of nx activation rows over nrows weight rows: rows
// [r0, r0 + rows) against activations [i0, i0 + na), tile by tile (act_tile_rows), each tile's
// activations in groups of act_group(). The tiles start at multiples of k.row_align.
template <class Call>
void for_each_act_call(const DotKernel& k, std::size_t w_stride, int64_t nrows, int64_t nx, Call&& call) {
  const int64_t group = nx <= 1 ? 1 : k.max_acts > 0 ? k.max_acts : act_group();  // a decode row needs no lookup
  const int64_t tile = act_tile_rows(k, w_stride, nrows, nx, group);
  for (int64_t r0 = 0; r0 < nrows; r0 += tile)
    for (int64_t i0 = 0; i0 < nx; i0 += group)
      call(r0, std::min(tile, nrows - r0), i0, static_cast<int>(std::min(group, nx - i0)));
}

// Rows [0, nrows) of w (n elements each, w_stride bytes apart) against nx prepared activation rows:
// act(i) is activation i, out(i) the nrows floats of its results; the kernel calls as
// for_each_act_call splits them (the same results for any split: see the top of this file).
template <class Act, class Out>
void dot_rows_tiled(const DotKernel& k, int64_t n, const uint8_t* w, std::size_t w_stride, int64_t nrows, int64_t nx,
                    Act&& act, Out&& out) {
  const void* acts[kMaxActGroup];
  float* outs[kMaxActGroup];
  for_each_act_call(k, w_stride, nrows, nx, [&](int64_t r0, int64_t rows, int64_t i0, int na) {
    for (int a = 0; a < na; ++a) {
      acts[a] = act(i0 + a);
      outs[a] = out(i0 + a) + r0;
    }
    dot_rows_acts(k, n, w + static_cast<std::size_t>(r0) * w_stride, w_stride, rows, acts, na, outs);
  });
}

// The kernel of a weight type on an ISA. Throws strata::Error(Value) when the type has no kernels
// or the ISA is not supported on this machine.
const DotKernel& dot_kernel(quant::GGMLType type, Isa isa);

// The activation form a weight type's dots consume, and its bytes for n elements.
quant::GGMLType activation_type(quant::GGMLType type);
std::size_t activation_row_bytes(quant::GGMLType type, int64_t n);

// Per-ISA tables (nullptr for a type the ISA lacks). Defined only where the ISA is compiled.
namespace scalar {
const DotKernel* kernel(quant::GGMLType type);
const DotKernel* repacked_kernel(quant::GGMLType type);  // Q4_0_R16 ... IQ4_XS_R16 (repack.h)
}  // namespace scalar
namespace avx2 {
const DotKernel* kernel(quant::GGMLType type);
}
namespace avx512 {
const DotKernel* kernel(quant::GGMLType type);
const DotKernel* vbmi_kernel(quant::GGMLType type);  // IQ2 / IQ3 by VBMI lookups, only while cpu_has_avx512_vbmi()
}  // namespace avx512
namespace neon {
const DotKernel* kernel(quant::GGMLType type);  // plain ARMv8-A (no SDOT unless the build targets it)
}
namespace neon_dotprod {
const DotKernel* kernel(quant::GGMLType type);  // the cpu/neon/ kernels rebuilt with SDOT
}
namespace neon_i8mm {
const DotKernel* kernel(quant::GGMLType type);  // SMMLA Q4_0 / Q5_0 / Q8_0, else neon_dotprod's
}
namespace amx {  // Q4_0_R16 / Q8_0_R16 on AMX tiles (cpu/amx/), only while amx_enabled()
const DotKernel* kernel(quant::GGMLType type);
}

}  // namespace strata::cpu
