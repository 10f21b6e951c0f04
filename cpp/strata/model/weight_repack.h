#pragma once
// The load-time hook of repacked weights (cpu/repack/repack.h): copies the model's linear maps of a
// type with a repacked form (Q4_0, Q5_0, Q5_1, Q8_0, the K-quants, IQ4_XS, IQ4_NL) into owned memory in the interleaved
// layout and repoints their views, before anything takes views of them. Repacked: attention q/k/v/o and the indexer
// projections, the shared expert, the routed experts (only when they are read from the mapping, and under `auto` only
// when the copies fit in half the available memory), the MTP block's, fc_embedding and fc_hidden. Never: token_embd and
// output (rows are read one by one), the router. A layer whose routed gate and up stacks are repacked alike gets them
// in one buffer, expert by expert: gate e, up e, gate e+1, ... (ExpertWeights::expert_step = two slices). A decode step
// reads an expert's gate then its up (engine/moe.cpp), and as one stream of twice the bytes they lose less to the start
// of each slice: a stream of 288 KB read 86-89 % of the sequential bandwidth on an AMD EPYC Zen 4, one of 576 KB 94-95
// % (docs/benchmarks.md, session 45).
#include <cstdint>
#include <string>

#include "strata/cpu/cpu_settings.h"
#include "strata/model/model.h"

namespace strata {
class ThreadPool;
}

namespace strata::model {

struct RepackReport {
  cpu::RepackMode mode = cpu::RepackMode::Off;
  int64_t matrices = 0;       // weights repacked (an expert stack counts once)
  uint64_t bytes = 0;         // owned bytes they now occupy
  double seconds = 0.0;       // wall time of the repack
  bool experts_left = false;  // auto left the routed experts mapped: their copies would not fit
  int64_t paired = 0;         // layers (MTP block included) whose gate and up experts lie side by side
  std::string summary() const;
};

// include_experts: the routed experts are read from the mapping (mmap mode); in stream mode the
// expert store repacks each slice as it arrives instead (experts/expert_store.h).
RepackReport repack_weights(Model& m, cpu::RepackMode mode, bool include_experts, ThreadPool* pool);

// Bytes of memory available to this process now (Linux MemAvailable; 0 when unknown).
uint64_t available_memory_bytes();

}  // namespace strata::model
