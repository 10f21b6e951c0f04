#pragma once
// Expert-sized slices of repacked weights for the GEMV benchmarks (slice_order_bench, moe_dispatch_bench):
// about `total` bytes of Q8_0_R16 or Q4_0_R16 ("q8_0" / "q4_0") in whole slices of rows x cols, arbitrary
// bytes (timing only), their kernel on the active path, and one activation row (all 0.5) in its form.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/quant/types.h"
#include "strata/util/aligned.h"

namespace strata::bench {

struct RepackedSlices {
  static bool known(const std::string& name) { return name == "q8_0" || name == "q4_0"; }

  RepackedSlices(const std::string& name, int64_t rows_, int64_t cols_, int64_t total)
      : type(name == "q8_0" ? quant::GGMLType::Q8_0_R16 : quant::GGMLType::Q4_0_R16),
        rows(rows_),
        cols(cols_),
        row_bytes(static_cast<int64_t>(quant::row_bytes(type, cols))),
        slice_bytes(rows * row_bytes),
        count(total / slice_bytes),
        weights(static_cast<std::size_t>(count * slice_bytes)),
        kernel(cpu::dot_kernel(type, cpu::active_isa())),
        x(static_cast<std::size_t>(cols), 0.5f),
        act(quant::row_bytes(kernel.act_type, cols)) {
    for (std::size_t i = 0; i < weights.size(); ++i) weights.data()[i] = static_cast<uint8_t>((i * 131) >> 3);
    kernel.quantize_act(x.data(), act.data(), cols);
  }

  const uint8_t* slice(int64_t s) const { return weights.data() + s * slice_bytes; }
  // Every slice once, in an order fixed by the seed (as a decode step meets its experts).
  std::vector<int64_t> shuffled(unsigned seed = 1) const {
    std::vector<int64_t> order(static_cast<std::size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    return order;
  }

  quant::GGMLType type;
  int64_t rows, cols, row_bytes, slice_bytes, count;
  AlignedBuffer<uint8_t> weights;
  const cpu::DotKernel& kernel;
  std::vector<float> x;      // the activation row
  std::vector<uint8_t> act;  // x in the kernel's activation form
};

}  // namespace strata::bench
