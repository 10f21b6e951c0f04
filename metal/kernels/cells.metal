// Metal entry points of the cell lists (indexer scores, selection) and the element-wise steps.
// Bodies: cells.h, moe.h.
#include "metal/kernels/cells.h"
#include "metal/kernels/moe.h"

kernel void strata_indexer_scores(constant CellArgs& a [[buffer(0)]], device const float* iq [[buffer(1)]],
                                  device const float* iw [[buffer(2)]], device const float* ik [[buffer(3)]],
                                  device float* scores [[buffer(4)]], STRATA_KPOS_PARAMS) {
  indexer_scores_body(a, iq, iw, ik, scores, STRATA_KPOS);
}

kernel void strata_select_cells(constant CellArgs& a [[buffer(0)]], device const float* scores [[buffer(1)]],
                                device int* lists [[buffer(2)]], device int* n_cells [[buffer(3)]],
                                threadgroup uint* picks [[threadgroup(0)]], threadgroup uint* red [[threadgroup(1)]],
                                STRATA_KPOS_PARAMS) {
  select_cells_body(a, scores, lists, n_cells, picks, red, STRATA_KPOS);
}

kernel void strata_elementwise(constant EwArgs& a [[buffer(0)]], device const float* x [[buffer(1)]],
                               device const float* y [[buffer(2)]], device float* out [[buffer(3)]],
                               STRATA_KPOS_PARAMS) {
  elementwise_body(a, x, y, out, STRATA_KPOS);
}
