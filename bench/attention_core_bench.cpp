// The attention core alone (docs/benchmarks.md, "Attention core"), per ISA path, the paths
// interleaved; min and median per call.
// - the demo model's shape: attend_group of one GQA group (3 query heads on one int8 KV head,
//   Dh 64) over a decode row's list at position 256 (4 sinks, 64 indexer picks with gaps, a window
//   of 128), and the score and value kernels by themselves;
// - the Qwen3-MoE shape (bench llama's model: 4 query heads per KV head, Dh 128, f32 cells, the
//   implicit list of all cells) at 144 and 1024 cells, f32 and fp16 (and int8 cells at 1024), warm (the cells in cache
//   from the call before) and cold (a 64 MiB buffer read before each call, as a decode step's streamed expert weights
//   evict the KV cells). attention_core_bench [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/engine/attention_head.h"
#include "strata/engine/attention_kernels.h"

using namespace strata::engine;
using Clock = std::chrono::steady_clock;

namespace {

struct Stat {
  std::vector<double> us;
  void print(const char* isa, const char* what) {
    std::sort(us.begin(), us.end());
    std::printf("%-7s %-22s min %7.2f us  median %7.2f us\n", isa, what, us.front(), us[us.size() / 2]);
  }
};

template <typename F>
double time_us(int iters, F&& f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
}

// Reads every line of a 64 MiB buffer (clean lines, like a decode step's streamed weights): the
// caches then hold none of the KV cells.
void evict_caches() {
  static const std::vector<char> junk(64u << 20, 1);
  static volatile char sink = 0;
  char s = 0;
  for (std::size_t i = 0; i < junk.size(); i += 64) s = static_cast<char>(s + junk[i]);
  sink = static_cast<char>(sink + s);
}

// One GQA group of the Qwen3-MoE shape over n cells; cold: the caches emptied before each call.
void qwen3moe_shape(const std::vector<strata::cpu::Isa>& isas, int reps, int64_t n, bool cold,
                    strata::model::KvType type) {
  constexpr int kDh = 128, kG = 4;
  // Room for 32768 cells, of which the first n are used: a buffer of 4 MiB and up, which KvCells puts on huge
  // pages as it does a model's cells (4 KiB pages would add a page walk per 4 KiB to the cold case, which
  // decode does not pay).
  KvCells kv(1, 32768, 1, kDh, type, 0);
  kv.prepare_write(0, 0, static_cast<int>(n));
  std::mt19937 gen(2);
  std::normal_distribution<float> nd;
  std::vector<float> k(kDh), v(kDh);
  for (int64_t c = 0; c < n; ++c) {
    for (auto& x : k) x = nd(gen);
    for (auto& x : v) x = nd(gen);
    kv.write(0, static_cast<int>(c), k.data(), v.data());
  }
  std::vector<float> q(kG * kDh), sc(static_cast<std::size_t>(kG * n)), ch(kG * kDh), out(kG * kDh);
  std::vector<float> e(kG * kSoftmaxChunk, 0.5f);
  for (auto& x : q) x = nd(gen);
  const float* qs[kG];
  float *outs[kG], *cos[kG];
  for (int g = 0; g < kG; ++g) {
    qs[g] = q.data() + g * kDh;
    outs[g] = out.data() + g * kDh;
    cos[g] = ch.data() + g * kDh;
  }
  const KvHeadData hd = kv.head_data(0, 0);
  std::vector<Stat> group(isas.size()), scores(isas.size()), values(isas.size());
  // Warm: many calls per sample; cold: one call per sample, the eviction untimed.
  const int calls = cold ? 1 : 50;
  auto sample = [&](auto&& f) {
    if (cold) evict_caches();
    return time_us(calls, f);
  };
  for (int rep = 0; rep < reps; ++rep)
    for (std::size_t j = 0; j < isas.size(); ++j) {
      strata::cpu::force_isa(isas[j]);
      const AttnKernels& ak = attn_kernels();
      for (int it = 0; it < (cold ? 10 : 1); ++it) {
        group[j].us.push_back(sample([&] { attend_group(kv, 0, 0, qs, kG, nullptr, n, sc.data(), ch.data(), outs); }));
        // The kernels alone, asking for the V rows ahead as attend_group's calls do.
        scores[j].us.push_back(sample([&] {
          ak.scores_for(type)(asking_for(hd, 0, std::min<int64_t>(kSoftmaxChunk, n)), qs, kG, nullptr, n, 11.3f,
                              sc.data(), n);
        }));
        values[j].us.push_back(sample([&] {
          for (int64_t c0 = 0; c0 < n; c0 += kSoftmaxChunk) {
            const int64_t len = std::min<int64_t>(kSoftmaxChunk, n - c0);
            ak.values_for(type)(asking_for(from_cell(hd, c0), len, std::min<int64_t>(kSoftmaxChunk, n - c0 - len)),
                                e.data(), kSoftmaxChunk, kG, nullptr, len, cos);
          }
        }));
      }
    }
  std::printf("qwen3moe shape: G %d, %ld cells, Dh %d, %s K/V, %s\n", kG, static_cast<long>(n), kDh,
              strata::model::kv_type_name(type), cold ? "cold (64 MiB read before each call)" : "warm");
  for (std::size_t j = 0; j < isas.size(); ++j) {
    const char* name = strata::cpu::isa_name(isas[j]);
    group[j].print(name, "attend_group");
    scores[j].print(name, "scores (all cells)");
    values[j].print(name, "values (all chunks)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--reps") reps = std::atoi(argv[i + 1]);
  constexpr int kDh = 64, kHkv = 2, kCells = 300, kG = 3;
  KvCells kv(1, kCells, kHkv, kDh, strata::model::KvType::Int8, 0);
  kv.prepare_write(0, 0, kCells);
  std::mt19937 gen(1);
  std::normal_distribution<float> nd;
  std::vector<float> k(kHkv * kDh), v(kHkv * kDh);
  for (int c = 0; c < kCells; ++c) {
    for (auto& x : k) x = nd(gen);
    for (auto& x : v) x = nd(gen);
    kv.write(0, c, k.data(), v.data());
  }
  std::vector<int32_t> list;
  for (int c = 0; c < 4; ++c) list.push_back(c);
  for (int c = 4; c < 129; c += 2) list.push_back(c);
  for (int c = 129; c < 257; ++c) list.push_back(c);
  const auto n = static_cast<int64_t>(list.size());
  std::vector<float> q(kG * kDh), sc(static_cast<std::size_t>(kG * n)), ch(kG * kDh), out(kG * kDh);
  std::vector<float> e(kG * kSoftmaxChunk, 0.5f);
  const float* qs[kG] = {q.data(), q.data() + kDh, q.data() + 2 * kDh};
  float* outs[kG] = {out.data(), out.data() + kDh, out.data() + 2 * kDh};
  float* cos[kG] = {ch.data(), ch.data() + kDh, ch.data() + 2 * kDh};
  for (auto& x : q) x = nd(gen);
  const KvHeadData hd = kv.head_data(0, 1);

  std::vector<strata::cpu::Isa> isas;
  for (strata::cpu::Isa isa : {strata::cpu::Isa::Scalar, strata::cpu::Isa::Avx2, strata::cpu::Isa::Avx512})
    if (strata::cpu::isa_supported(isa)) isas.push_back(isa);
  std::vector<Stat> group(isas.size()), scores(isas.size()), values(isas.size());
  std::printf("attend_group: G %d, %ld cells, Dh %d, int8 K/V\n", kG, static_cast<long>(n), kDh);
  for (int rep = 0; rep < reps; ++rep)
    for (std::size_t j = 0; j < isas.size(); ++j) {
      strata::cpu::force_isa(isas[j]);
      const AttnKernels& ak = attn_kernels();
      const int iters = isas[j] == strata::cpu::Isa::Scalar ? 20 : 200;
      group[j].us.push_back(
          time_us(iters, [&] { attend_group(kv, 0, 1, qs, kG, list.data(), n, sc.data(), ch.data(), outs); }));
      scores[j].us.push_back(time_us(iters, [&] { ak.scores_i8(hd, qs, kG, list.data(), n, 8.0f, sc.data(), n); }));
      values[j].us.push_back(time_us(iters, [&] {
        for (int64_t c0 = 0; c0 < n; c0 += kSoftmaxChunk)
          ak.values_i8(hd, e.data(), kSoftmaxChunk, kG, list.data() + c0, std::min<int64_t>(kSoftmaxChunk, n - c0),
                       cos);
      }));
    }
  for (std::size_t j = 0; j < isas.size(); ++j) {
    const char* name = strata::cpu::isa_name(isas[j]);
    group[j].print(name, "attend_group");
    scores[j].print(name, "scores_i8 (all cells)");
    values[j].print(name, "values_i8 (all chunks)");
  }
  std::vector<strata::cpu::Isa> simd;  // the portable path is far slower and not the question here
  for (strata::cpu::Isa isa : isas)
    if (isa != strata::cpu::Isa::Scalar) simd.push_back(isa);
  // f32 (qwen3moe's own), then the same group over fp16 and int8 cells (the kv_type setting).
  for (strata::model::KvType type : {strata::model::KvType::F32, strata::model::KvType::F16})
    for (int64_t cells : {144, 1024})
      for (bool cold : {false, true}) qwen3moe_shape(simd, reps, cells, cold, type);
  for (bool cold : {false, true}) qwen3moe_shape(simd, reps, 1024, cold, strata::model::KvType::Int8);
  return 0;
}
