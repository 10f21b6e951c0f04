// The decode GEMV's ceiling in the shape decode dispatches it (docs/benchmarks.md, session 40): 512 MiB
// of repacked weights (Q4_0_R16 or Q8_0_R16, 512 x 1024 expert slices) multiplied by one activation
// through engine::run_linear_tasks on a ThreadPool of T threads, (a) in large calls of 64 slices and
// (b) as dispatches of N random slices each (a decode step's gate and up projections of 8 experts:
// 16), (c) as (b) with the slices taken in adjacent pairs (an expert's gate and up side by side, as
// the repack lays a layer's routed experts out: model/weight_repack.h), next to the streaming read
// bandwidth at the same thread count (measured after the passes, not between them: on a shared host
// the shares move with it). Weight GB/s, best of --reps passes; (b) and (c) alternate pass by pass.
// Timing only; the contents are arbitrary bytes.
// moe_dispatch_bench [--type q8_0|q4_0] [--slices N] [--threads 1,2] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "repacked_slices.h"
#include "strata/cpu/features.h"
#include "strata/cpu/membench.h"
#include "strata/engine/multi_linear.h"
#include "strata/util/thread_pool.h"

using namespace strata;

int main(int argc, char** argv) {
  std::string type = "q4_0";
  int nsl = 16, reps = 5;
  std::vector<int> threads = {1, 2};
  bool bad_args = argc % 2 == 0;  // a flag without its value
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--type")
      type = argv[i + 1];
    else if (a == "--slices")
      nsl = std::atoi(argv[i + 1]);
    else if (a == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (a == "--threads") {
      threads.clear();
      for (const char* p = argv[i + 1]; *p;) {
        threads.push_back(std::atoi(p));
        while (*p && *p != ',') ++p;
        if (*p) ++p;
      }
    } else {
      bad_args = true;
    }
  }
  const bool bad_threads = threads.empty() || *std::min_element(threads.begin(), threads.end()) < 1;
  if (bad_args || nsl < 1 || reps < 1 || bad_threads || !bench::RepackedSlices::known(type)) {
    std::fprintf(stderr, "usage: %s [--type q8_0|q4_0] [--slices N >= 1] [--threads 1,2] [--reps N >= 1]\n", argv[0]);
    return 2;
  }
  constexpr int64_t kCols = 1024, kRows = 512;
  const bench::RepackedSlices w(type, kRows, kCols, int64_t{512} << 20);
  const int64_t slice = w.slice_bytes, nslices = w.count;
  std::vector<float> out(static_cast<std::size_t>(nslices * kRows));
  // The activation row prepared as decode prepares it, and its tasks made by engine::PreparedInput::task.
  std::vector<uint8_t> arena(engine::PreparedInput::arena_bytes(1, kCols));
  engine::PreparedInput prep;
  prep.reset(w.x.data(), 1, kCols, arena.data());
  std::size_t act_stride = 0;
  prep.get(w.type, &act_stride);  // quantized here, outside the timed passes
  if (nsl > nslices) nsl = static_cast<int>(nslices);
  const int64_t ndisp = nslices / nsl, ndisp_pairs = nslices / 2 * 2 / nsl;  // (c) reads paired slices only
  const std::vector<int64_t> order = w.shuffled();
  // Every pair of adjacent slices (2p, 2p + 1) once, in an order fixed by the seed; an odd count's last
  // slice is in no pair.
  std::vector<int64_t> pair_order(static_cast<std::size_t>(nslices / 2));
  std::iota(pair_order.begin(), pair_order.end(), 0);
  std::shuffle(pair_order.begin(), pair_order.end(), std::mt19937(2));
  for (int th : threads) {
    ThreadPool pool(th, 300);
    auto task = [&](int64_t s, int64_t rows) {
      const model::Weight wt{w.type, w.slice(s), rows, kCols, static_cast<std::size_t>(w.row_bytes)};
      return prep.task(wt, out.data() + s * kRows);
    };
    auto best = [&](int64_t bytes, auto&& pass) {
      double b = 1e30;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        pass();
        b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return static_cast<double>(bytes) / b / 1e9;
    };
    const double one = best(nslices * slice, [&] {
      for (int64_t c = 0; c < nslices; c += 64) {  // calls of 64 slices (18 or 34 MiB)
        engine::LinearTask tk = task(c, std::min<int64_t>(64, nslices - c) * kRows);
        engine::run_linear_tasks(&tk, 1, &pool);
      }
    });
    std::vector<engine::LinearTask> tasks(static_cast<std::size_t>(nsl));
    // (b): slice order[k]; (c): the slices 2p and 2p + 1 of pair p = pair_order[k / 2], one after the
    // other (with an odd N the dispatch's last task starts a pair it does not finish).
    auto dispatches = [&](bool pairs) {
      for (int64_t d = 0; d < (pairs ? ndisp_pairs : ndisp); ++d) {
        for (int i = 0; i < nsl; ++i) {
          const auto k = static_cast<std::size_t>(d * nsl + i);
          const int64_t s = pairs ? 2 * pair_order[k / 2] + static_cast<int64_t>(k % 2) : order[k];
          tasks[static_cast<std::size_t>(i)] = task(s, kRows);
        }
        engine::run_linear_tasks(tasks.data(), nsl, &pool);
      }
    };
    const auto rate = [&](bool pairs) {
      const auto t0 = std::chrono::steady_clock::now();
      dispatches(pairs);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return static_cast<double>((pairs ? ndisp_pairs : ndisp) * nsl * slice) / sec / 1e9;
    };
    double moe = 0.0, paired = 0.0;
    for (int r = 0; r < reps; ++r) {
      moe = std::max(moe, rate(false));
      paired = std::max(paired, rate(true));
    }
    const double bw = cpu::measure_read_bandwidth(std::size_t{512} << 20, th, reps).gb_per_s;
    std::printf(
        "%s %s, %d thread(s): read %.1f GB/s; large calls %.1f GB/s (%.0f %%); %d random slices a dispatch %.1f GB/s "
        "(%.0f %%), in adjacent pairs %.1f GB/s (%.0f %%)\n",
        type.c_str(), cpu::isa_name(cpu::active_isa()), th, bw, one, 100.0 * one / bw, nsl, moe, 100.0 * moe / bw,
        paired, 100.0 * paired / bw);
  }
  return 0;
}
