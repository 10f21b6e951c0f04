// AVX2 dots of the IQ formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) with Q8_K
// activations, one and several: each format's group decoder (iq_groups_avx2.h) in the shared loops of
// dot_iq_avx2.h, bitwise the scalar kernels.
#include "strata/cpu/avx2/dot_avx2.h"
#include "strata/cpu/avx2/dot_iq_avx2.h"

namespace strata::cpu::avx2 {

void dot_rows_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ2XXS>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq2_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                            int nact, float* const* outs) {
  iq_rows_multi<IQ2XXS>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ2XS>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq2_xs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                           int nact, float* const* outs) {
  iq_rows_multi<IQ2XS>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq2_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ2S>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq2_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ2S>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ3XXS>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq3_xxs(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                            int nact, float* const* outs) {
  iq_rows_multi<IQ3XXS>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq3_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ3S>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq3_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ3S>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ1S>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq1_s(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ1S>(n, w, stride, nrows, acts, nact, outs);
}
void dot_rows_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* act, float* out) {
  iq_rows<IQ1M>(n, w, stride, nrows, act, out);
}
void dot_rows_multi_iq1_m(int64_t n, const void* w, std::size_t stride, int64_t nrows, const void* const* acts,
                          int nact, float* const* outs) {
  iq_rows_multi<IQ1M>(n, w, stride, nrows, acts, nact, outs);
}

}  // namespace strata::cpu::avx2
