#include "strata/model/weight_repack.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "strata/cpu/repack/repack.h"
#include "strata/util/aligned.h"
#include "strata/util/thread_pool.h"

namespace strata::model {
namespace {

struct Job {
  const uint8_t* src;
  uint8_t* dst;
  quant::GGMLType type;
  int64_t rows, cols;
};

// A layer's routed stacks: gate, up, down.
using Stacks = std::array<ExpertWeights*, 3>;

// Every linear map of a layer that goes through the GEMV kernels, and its routed stacks.
void layer_weights(LayerWeights& l, std::vector<Weight*>& out, std::vector<Stacks>& experts) {
  for (Weight* w : {&l.attn.q, &l.attn.k, &l.attn.v, &l.attn.o, &l.attn.idx_q, &l.attn.idx_k, &l.attn.idx_w,
                    &l.moe.sh_gate, &l.moe.sh_up, &l.moe.sh_down})
    out.push_back(w);
  experts.push_back(Stacks{&l.moe.gate, &l.moe.up, &l.moe.down});
}

bool repacks(cpu::RepackMode mode, const ExpertWeights* e) {
  return e->data && cpu::should_repack(mode, e->type, e->rows);
}

// Gate and up of one layer that can share a buffer slice by slice: both repacked, the same shape.
bool pairs(cpu::RepackMode mode, const ExpertWeights* g, const ExpertWeights* u) {
  return repacks(mode, g) && repacks(mode, u) && g->type == u->type && g->rows == u->rows && g->cols == u->cols &&
         g->n_expert == u->n_expert;
}

}  // namespace

// C stdio, not iostreams (util/thread_pool.cpp says why).
std::string RepackReport::summary() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, ": %lld matrices, %g MiB owned, %g s", static_cast<long long>(matrices),
                static_cast<double>(bytes) / (1024.0 * 1024.0), seconds);
  std::string s = std::string("repack ") + cpu::repack_mode_name(mode) + buf;
  if (paired > 0) s += ", gate and up side by side in " + std::to_string(paired) + " layers";
  if (experts_left) s += " (routed experts left mapped: their copies would not fit in memory)";
  return s;
}

uint64_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "re");
  if (!f) return 0;
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
  std::fclose(f);
  return found ? static_cast<uint64_t>(kib) * 1024 : 0;
}

RepackReport repack_weights(Model& m, cpu::RepackMode mode, bool include_experts, ThreadPool* pool) {
  RepackReport rep;
  rep.mode = mode;
  if (mode == cpu::RepackMode::Off) return rep;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Weight*> mats;
  std::vector<Stacks> stacks;
  for (LayerWeights& l : m.layers) layer_weights(l, mats, stacks);
  if (m.mtp) {
    layer_weights(m.mtp->block, mats, stacks);
    mats.push_back(&m.mtp->fc_embedding);
    mats.push_back(&m.mtp->fc_hidden);
  }
  // The output head is the largest single matrix a decode step reads (V x d). The copy is a second
  // view (Model::logits_head): `output` keeps the file's rows for the drafter's vocabulary subset and
  // for a head tied to the token embedding.
  m.output_repacked = m.output;
  mats.push_back(&m.output_repacked);
  if (!include_experts) stacks.clear();
  uint64_t expert_bytes = 0;
  for (const Stacks& layer : stacks)
    for (const ExpertWeights* e : layer)
      if (repacks(mode, e)) expert_bytes += static_cast<uint64_t>(e->n_expert) * e->expert_stride;
  if (mode == cpu::RepackMode::Auto && expert_bytes > 0) {
    const uint64_t avail = available_memory_bytes();
    if (avail == 0 || expert_bytes > avail / 2) {
      stacks.clear();
      rep.experts_left = true;
    }
  }

  // Allocate and repoint every view first, then copy in parallel (one job per matrix or expert).
  std::vector<Job> jobs;
  for (Weight* w : mats) {
    if (!w->present() || !cpu::should_repack(mode, w->type, w->rows)) continue;
    const std::size_t bytes = static_cast<std::size_t>(w->rows) * w->row_stride;
    AlignedBuffer<uint8_t> buf(bytes);
    jobs.push_back(Job{w->data, buf.data(), w->type, w->rows, w->cols});
    *w = Weight{cpu::repacked_type(w->type), buf.data(), w->rows, w->cols, w->row_stride};
    m.owned_weights.push_back(std::move(buf));
    rep.matrices += 1;
    rep.bytes += bytes;
  }
  // A layer's gate and up share one buffer, slice by slice, where they pair; any other stack gets its own.
  auto repack_stacks = [&](std::initializer_list<ExpertWeights*> group) {
    const ExpertWeights* first = *group.begin();
    const std::size_t S = first->expert_stride, n = group.size();
    const std::size_t bytes = static_cast<std::size_t>(first->n_expert) * S * n;
    AlignedBuffer<uint8_t> buf(bytes);
    std::size_t k = 0;
    for (ExpertWeights* e : group) {
      uint8_t* base = buf.data() + k++ * S;
      for (int64_t x = 0; x < e->n_expert; ++x)
        jobs.push_back(Job{e->expert(x).data, base + static_cast<std::size_t>(x) * n * S, e->type, e->rows, e->cols});
      e->type = cpu::repacked_type(e->type);
      e->data = base;
      e->expert_step = n * S;
    }
    m.owned_weights.push_back(std::move(buf));
    rep.matrices += static_cast<int64_t>(n);
    rep.bytes += bytes;
  };
  for (const Stacks& layer : stacks) {
    auto [gate, up, down] = layer;
    if (pairs(mode, gate, up)) {
      repack_stacks({gate, up});
      rep.paired += 1;
    } else {
      for (ExpertWeights* e : {gate, up})
        if (repacks(mode, e)) repack_stacks({e});
    }
    if (repacks(mode, down)) repack_stacks({down});
  }
  auto run = [&jobs](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j)
      cpu::repack_rows(jobs[j].type, jobs[j].src, jobs[j].rows, jobs[j].cols, jobs[j].dst);
  };
  if (pool)
    pool->parallel_for(static_cast<int64_t>(jobs.size()), 1, run);
  else
    run(0, static_cast<int64_t>(jobs.size()));
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace strata::model
