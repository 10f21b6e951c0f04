#include "strata/cpu/kernels.h"

#include <algorithm>
#include <string>

#include "strata/cpu/repack/act_terms.h"
#include "strata/cpu/repack/repack.h"
#include "strata/util/error.h"

namespace strata::cpu {

quant::GGMLType activation_type(quant::GGMLType type) {
  using quant::GGMLType;
  switch (type) {
    case GGMLType::F32:
    case GGMLType::F16:
    case GGMLType::BF16: return GGMLType::F32;
    case GGMLType::Q4_0:
    case GGMLType::Q5_0:
    case GGMLType::Q5_1:
    case GGMLType::IQ4_NL:
    case GGMLType::Q8_0: return GGMLType::Q8_0;
    case GGMLType::Q2_K:
    case GGMLType::Q3_K:
    case GGMLType::Q4_K:
    case GGMLType::Q5_K:
    case GGMLType::Q6_K:
    case GGMLType::IQ4_XS:
    case GGMLType::IQ2_XXS:
    case GGMLType::IQ2_XS:
    case GGMLType::IQ3_XXS:
    case GGMLType::IQ3_S:
    case GGMLType::IQ2_S:
    case GGMLType::IQ1_S:
    case GGMLType::IQ1_M: return GGMLType::Q8_K;
    default:  // a repacked type takes its plain type's activations
      if (is_repacked(type)) return activation_type(plain_type(type));
      break;
  }
  throw_error(ErrorKind::Value, std::string("no dot kernels for type ") + quant::type_name(type));
}

std::size_t activation_row_bytes(quant::GGMLType type, int64_t n) {
  (void)quant::row_bytes(type, n);  // n must fit the weight's block too
  return quant::row_bytes(activation_type(type), n);
}

int64_t act_group() { return amx_enabled() ? 16 : 8; }

// A call never takes more activations than a repacked kernel prepares at once (repack/act_terms.h).
static_assert(kMaxActGroup <= repack::kPrepActs, "act_group() activations must fit one ActTerms chunk");

int64_t act_tile_rows(const DotKernel& k, std::size_t w_stride, int64_t nrows, int64_t nx, int64_t group) {
  if (nx <= 1 || (reads_rows_once_per_call(k) && nx <= group)) return std::max<int64_t>(nrows, 1);
  const int64_t rows = static_cast<int64_t>(kActTileBytes / std::max<std::size_t>(w_stride, 1));
  return std::max<int64_t>(k.row_align, rows / k.row_align * k.row_align);
}

void dot_rows_acts(const DotKernel& k, int64_t n, const void* w, std::size_t w_stride, int64_t nrows,
                   const void* const* acts, int nact, float* const* outs) {
  if (nact == 1 || k.dot_rows_multi == nullptr) {
    for (int a = 0; a < nact; ++a) k.dot_rows(n, w, w_stride, nrows, acts[a], outs[a]);
    return;
  }
  k.dot_rows_multi(n, w, w_stride, nrows, acts, nact, outs);
}

const DotKernel& dot_kernel(quant::GGMLType type, Isa isa) {
  (void)activation_type(type);  // throws for types without kernels
  if (!isa_supported(isa)) throw_error(ErrorKind::Value, std::string("ISA not available here: ") + isa_name(isa));
  const DotKernel* k = nullptr;
  switch (isa) {
    case Isa::Scalar: k = scalar::kernel(type); break;
    case Isa::Avx2:
#if defined(STRATA_HAVE_AVX2_TU)
      k = avx2::kernel(type);
#endif
      break;
    case Isa::Avx512:
#if defined(STRATA_HAVE_AVX512_TU)
      k = avx512::kernel(type);
      // A type without a 512-bit kernel of its own runs the AVX2 one (AVX-512 CPUs run AVX2).
      if (k == nullptr) k = avx2::kernel(type);
      // The IQ2 / IQ3 grid lookups by AVX512_VBMI where the CPU has it and it is not turned off.
      if (cpu_has_avx512_vbmi())
        if (const DotKernel* t = avx512::vbmi_kernel(type)) k = t;
#endif
#if defined(STRATA_HAVE_AMX_TU)
      // AMX extends the AVX-512 path where it is usable and not turned off (cpu/features.h).
      if (amx_enabled())
        if (const DotKernel* t = amx::kernel(type)) k = t;
#endif
      break;
    case Isa::Neon:
#if defined(STRATA_HAVE_NEON_TU)
      k = neon::kernel(type);
#endif
      break;
    case Isa::NeonDotprod:
#if defined(STRATA_HAVE_NEON_TU)
      k = neon_dotprod::kernel(type);
#endif
      break;
    case Isa::NeonI8mm:
#if defined(STRATA_HAVE_NEON_TU)
      k = neon_i8mm::kernel(type);
#endif
      break;
  }
  // A type an ISA has no kernel of its own for runs the reference one: correct, not fast (the
  // repacked types on NEON — cpu/repack/repack.h only repacks for ISAs that have them).
  if (k == nullptr) k = scalar::kernel(type);
  if (k == nullptr)
    throw_error(ErrorKind::Internal, std::string("no ") + isa_name(isa) + " kernel for " + quant::type_name(type));
  return *k;
}

}  // namespace strata::cpu
