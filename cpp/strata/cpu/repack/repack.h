#pragma once
// Repacked weights: Q4_0, Q5_0, Q8_0, Q2_K ... Q6_K and IQ4_XS matrices copied at load into groups of
// 16 interleaved rows (layout.h) so the kernels load 16 rows' scales at once (Q4_K's and IQ4_XS's
// 6-bit scales regrouped for the kernel, Q5_0's fifth bits as one mask per 4-column step) and feed
// VNNI / maddubs without per-row shuffles, as llama.cpp's CPU_REPACK does. A repacked matrix has its
// own internal type (Q4_0_R16, Q5_0_R16, Q8_0_R16, Q4_K_R16, ..., IQ4_XS_R16) with the same bytes per row, so Weight
// views, row strides and cpu::gemv / gemm / gemm_prepared / the engine's linear tasks work unchanged; the kernel of a
// repacked type has DotKernel::row_align = 16 and every row split honours it.
//
// Results: per row, the dot of a repacked matrix is bitwise the scalar kernel of its plain type
// (the same integer block sums, then sum += sumi · (dx·dy) block by block, multiply and add
// rounded separately) on every ISA.
#include <cstddef>
#include <cstdint>

#include "strata/cpu/cpu_settings.h"
#include "strata/cpu/features.h"
#include "strata/quant/types.h"

namespace strata::cpu {

inline constexpr int kRepackRows = 16;

// Q4_0 -> Q4_0_R16, Q5_0 -> Q5_0_R16, Q8_0 -> Q8_0_R16, Q2_K -> Q2_K_R16, Q3_K -> Q3_K_R16, Q4_K -> Q4_K_R16, Q5_K ->
// Q5_K_R16, Q6_K -> Q6_K_R16, IQ4_XS -> IQ4_XS_R16, IQ4_NL -> IQ4_NL_R16 (Q4_0_R16's layout); `t` itself when t has
// no repacked form.
quant::GGMLType repacked_type(quant::GGMLType t);
// The plain type of a repacked one (itself for any other type).
quant::GGMLType plain_type(quant::GGMLType t);
bool is_repacked(quant::GGMLType t);
// t has a repacked form and rows is a whole number of groups.
bool can_repack(quant::GGMLType t, int64_t rows);
// Whether `auto` repacks weights of plain type t for kernels of `isa` (where it measured faster:
// docs/quantization.md).
bool repack_pays(quant::GGMLType t, Isa isa);
// The decision for one matrix under a mode (On: whenever can_repack; Auto: can_repack and
// repack_pays for the active ISA; Off: never).
bool should_repack(RepackMode mode, quant::GGMLType t, int64_t rows);

// The process's mode (STRATA_REPACK, process_cpu_settings()), for engines made without settings.
RepackMode repack_mode();

// dst (rows · row_bytes(t, cols) bytes) = src of plain type t in the repacked layout.
// Throws strata::Error(Value) unless can_repack(t, rows).
void repack_rows(quant::GGMLType t, const void* src, int64_t rows, int64_t cols, void* dst);
// The inverse of repack_rows: dst = the plain type's bytes of a repacked matrix (inspection).
void unpack_rows(quant::GGMLType repacked, const void* src, int64_t rows, int64_t cols, void* dst);
// The same in place (through a per-thread scratch buffer that only grows): the expert store's
// arrival hook for slices read from disk.
void repack_rows_in_place(quant::GGMLType t, void* data, int64_t rows, int64_t cols);

}  // namespace strata::cpu
