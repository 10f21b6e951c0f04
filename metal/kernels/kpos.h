#pragma once
// Where a thread is, as every kernel body receives it (1-D threadgroups, up to 3-D grids). A .metal
// entry point builds it from its [[attribute]] parameters (STRATA_KPOS_PARAMS / STRATA_KPOS); the
// emulator's entry wrappers build it from emu::ThreadPos.
#include "metal/kernels/msl_compat.h"

struct KPos {
  uint tg_x, tg_y, tg_z;  // threadgroup_position_in_grid
  uint tid;               // thread_index_in_threadgroup
  uint tg_size;           // threads_per_threadgroup
  uint sg;                // simdgroup_index_in_threadgroup
  uint lane;              // thread_index_in_simdgroup
  uint n_sg;              // simdgroups_per_threadgroup
};

#if defined(__METAL_VERSION__)
#define STRATA_KPOS_PARAMS                                                                            \
  uint3 strata_tgp [[threadgroup_position_in_grid]], uint strata_tid [[thread_index_in_threadgroup]], \
      uint strata_tgs [[threads_per_threadgroup]], uint strata_sg [[simdgroup_index_in_threadgroup]], \
      uint strata_lane [[thread_index_in_simdgroup]], uint strata_nsg [[simdgroups_per_threadgroup]]
#define STRATA_KPOS \
  KPos { strata_tgp.x, strata_tgp.y, strata_tgp.z, strata_tid, strata_tgs, strata_sg, strata_lane, strata_nsg }
#else
inline KPos kpos_of(const strata::emu::ThreadPos& p) {
  return KPos{p.tg_pos.x, p.tg_pos.y, p.tg_pos.z, p.index, p.tg_size.x, p.simd_group, p.simd_lane, p.simd_groups};
}
#endif
