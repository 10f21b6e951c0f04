#pragma once
// A model made ready for the CPU backend — the drafter's low-bit copy and the repacked weights
// (cpu/repack/repack.h) — and shared between engines. Every engine a process opens on the same file
// with the same load settings reads one copy: without it each Python session loaded and repacked the
// whole model again (a second session doubled the process's memory and paid the repack's seconds).
// After preparation a model is only read (model/model.h), so engines on any threads may share it.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "strata/cpu/cpu_settings.h"
#include "strata/model/drafter_requant.h"
#include "strata/model/model.h"
#include "strata/model/weight_repack.h"

namespace strata {
class ThreadPool;
}

namespace strata::engine {

struct PreparedModel {
  std::unique_ptr<model::Model> model;
  model::RepackReport repack;  // what preparing it repacked
};

// Requant the drafter, then repack (logging what it repacked): before any Window / Mtp takes views of
// the weights. include_experts: the routed experts are read from the mapping (mmap mode); a streaming
// store repacks each expert slice as it arrives instead.
std::shared_ptr<PreparedModel> prepare_cpu_model(std::unique_ptr<model::Model> m, model::DrafterRequant requant,
                                                 cpu::RepackMode repack, bool include_experts, ThreadPool* pool);

// What makes two prepared models the same: the files (by identity, so a file replaced on disk is
// loaded again) and the settings that choose what preparation makes. Only mmap mode shares (experts
// included). Under repack `auto` the first engine's decision to leave the routed experts mapped (their
// copies would not fit in half the available memory) holds for every engine that shares its model.
struct FileIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;  // a file rewritten in place changes both
  bool operator==(const FileIdentity&) const = default;
};

struct PreparedModelKey {
  FileIdentity file;
  FileIdentity mtp_file;  // deepseek4's separate MTP file (all 0 = none)
  int kv_type = -1;       // model::KvType, -1 = auto (auto_cpu_kv_type: fixed per file and processor)
  int requant = 0;        // model::DrafterRequant
  int repack = 0;         // cpu::RepackMode, resolved
  int isa = 0;            // cpu::Isa: `auto` repacks what the active path's kernels read faster
  bool operator==(const PreparedModelKey&) const = default;
};

// The key of `path` (and `mtp_path`, "" = none) under these settings; nullopt when a file cannot be
// stat'ed (loading then reports the error).
std::optional<PreparedModelKey> prepared_model_key(const std::string& path, const std::string& mtp_path,
                                                   std::optional<model::KvType> kv_type, model::DrafterRequant requant,
                                                   cpu::RepackMode repack);

// The process's live prepared model under `key`, or a new one from make() — kept for as long as an
// engine holds it (the registry holds weak references). make() runs under the registry's lock, so two
// engines opened at once on one file still load it once (engines being built elsewhere in the process
// wait for it meanwhile: a load takes seconds at most, and happens once per file and settings).
std::shared_ptr<const PreparedModel> shared_prepared_model(const PreparedModelKey& key,
                                                           const std::function<std::shared_ptr<PreparedModel>()>& make);

// The cell type `kv_type` auto gives a model on the cpu backend: fp16 where the architecture's own
// type is f32 (qwen3moe, glm4moe) and this processor runs the avx2 path, whose attention kernels read
// fp16 cells with F16C (decided by the hardware, not the active path, so forcing a lower path keeps
// the cells); otherwise the architecture's own (strata int8, deepseek4's compressed f32, f32 without
// the avx2 path, where fp16 would be converted in scalar code). 16-bit caches are llama.cpp's, vLLM's and mlx-lm's
// default.
model::KvType auto_cpu_kv_type(const model::HParams& hp);

// `path` (with `mtp_path`, "" = none) loaded, its K/V cell type set (nullopt = auto_cpu_kv_type): what
// every cpu engine starts from.
std::unique_ptr<model::Model> load_cpu_model(const std::string& path, const std::string& mtp_path,
                                             std::optional<model::KvType> kv_type);

// mmap mode: the process's prepared model of `path` under these settings, shared with every engine opened
// on it alike; when none is alive it is loaded and prepared on a pool of n_threads (0 = the global pool),
// as an engine preparing alone would. A file that cannot be stat'ed is loaded unshared (the load reports
// the error).
std::shared_ptr<const PreparedModel> shared_cpu_model(const std::string& path, const std::string& mtp_path,
                                                      std::optional<model::KvType> kv_type,
                                                      model::DrafterRequant requant, cpu::RepackMode repack,
                                                      int n_threads);

// Live prepared models in the registry (tests).
int prepared_models_alive();

}  // namespace strata::engine
