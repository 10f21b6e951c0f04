// How the decode GEMV's read rate depends on where its matrices lie (docs/benchmarks.md, session 14):
// 256 MiB of repacked weights (Q8_0_R16 or Q4_0_R16, 1024 columns) multiplied by one activation on
// one thread, (a) as one call over every row, (b) as expert-sized slices of R rows in address order,
// (c) the same slices in a random order, as a decode step meets its experts, and (d) that order with
// the first KiB of the next slice prefetched before each call. Cold: a 64 MiB buffer is read before
// each timed pass. Best of --reps passes, weight GB/s. Timing only; the contents are arbitrary bytes.
// slice_order_bench [--rows R] [--type q8_0|q4_0] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "repacked_slices.h"
#include "strata/cpu/features.h"
#include "strata/util/aligned.h"

using namespace strata;

int main(int argc, char** argv) {
  int64_t rows = 512;
  int reps = 5;
  std::string type = "q8_0";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rows")
      rows = std::atoll(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--type")
      type = argv[i + 1];
  }
  if (rows < 16 || rows % 16 != 0 || reps < 1 || !bench::RepackedSlices::known(type)) {
    std::fprintf(stderr, "usage: %s [--rows R (a multiple of 16)] [--type q8_0|q4_0] [--reps N]\n", argv[0]);
    return 2;
  }
  constexpr int64_t kCols = 1024;
  const bench::RepackedSlices w(type, rows, kCols, int64_t{256} << 20);
  const int64_t slice = w.slice_bytes, nslices = w.count;
  const cpu::DotKernel& k = w.kernel;
  std::vector<float> out(static_cast<std::size_t>(nslices * rows));
  const std::vector<int64_t> order = w.shuffled();
  AlignedBuffer<uint8_t> flush(std::size_t{64} << 20);
  auto slice_at = [&](int64_t s) {
    k.dot_rows(kCols, w.slice(s), static_cast<std::size_t>(w.row_bytes), rows, w.act.data(), out.data() + s * rows);
  };
  auto gbs = [&](auto&& pass) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      for (std::size_t i = 0; i < flush.size(); i += 64) flush.data()[i] = static_cast<uint8_t>(flush.data()[i] + 1);
      const auto t0 = std::chrono::steady_clock::now();
      pass();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return static_cast<double>(nslices * slice) / best / 1e9;
  };
  std::printf("%s, %s, 1 thread, %lld slices of %lld rows x %lld columns (%lld KiB), cold, best of %d\n", type.c_str(),
              cpu::isa_name(cpu::active_isa()), static_cast<long long>(nslices), static_cast<long long>(rows),
              static_cast<long long>(kCols), static_cast<long long>(slice >> 10), reps);
  const double one = gbs([&] {
    k.dot_rows(kCols, w.slice(0), static_cast<std::size_t>(w.row_bytes), nslices * rows, w.act.data(), out.data());
  });
  const double in_order = gbs([&] {
    for (int64_t s = 0; s < nslices; ++s) slice_at(s);
  });
  const double shuffled = gbs([&] {
    for (int64_t s : order) slice_at(s);
  });
  std::printf("one call %.1f GB/s; slices in address order %.1f; shuffled %.1f (%.2f of one call)\n", one, in_order,
              shuffled, shuffled / one);
  for (int64_t kib : {2, 8, 32, 128}) {
    const double ahead = gbs([&] {
      for (std::size_t i = 0; i < order.size(); ++i) {
        if (i + 1 < order.size()) {
          const uint8_t* next = w.slice(order[i + 1]);
          for (int64_t b = 0; b < std::min(kib << 10, slice); b += 64) __builtin_prefetch(next + b, 0, 2);
        }
        slice_at(order[i]);
      }
    });
    std::printf("shuffled, next slice's first %lld KiB prefetched: %.1f GB/s\n", static_cast<long long>(kib), ahead);
  }
  return 0;
}
