#include "strata/engine/prepared_model.h"

#include <sys/stat.h>

#include <mutex>
#include <utility>
#include <vector>

#include "strata/cpu/features.h"
#include "strata/engine/kv_cells.h"
#include "strata/util/log.h"
#include "strata/util/thread_pool.h"

namespace strata::engine {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<PreparedModelKey, std::weak_ptr<const PreparedModel>>> entries;
};

Registry& registry() {
  static Registry r;
  return r;
}

bool identity_of(const std::string& path, FileIdentity& id) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) return false;
  id.dev = static_cast<uint64_t>(st.st_dev);
  id.ino = static_cast<uint64_t>(st.st_ino);
  id.size = static_cast<uint64_t>(st.st_size);
  // Modification and status-change times together: a file rewritten in place changes both.
#if defined(__APPLE__)
  const struct timespec &t = st.st_mtimespec, &c = st.st_ctimespec;
#else
  const struct timespec &t = st.st_mtim, &c = st.st_ctim;
#endif
  id.mtime_ns = static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
  id.ctime_ns = static_cast<int64_t>(c.tv_sec) * 1000000000 + static_cast<int64_t>(c.tv_nsec);
  return true;
}

}  // namespace

std::shared_ptr<PreparedModel> prepare_cpu_model(std::unique_ptr<model::Model> m, model::DrafterRequant requant,
                                                 cpu::RepackMode repack, bool include_experts, ThreadPool* pool) {
  model::requant_drafter(*m, requant, pool);
  auto p = std::make_shared<PreparedModel>();
  p->repack = model::repack_weights(*m, repack, include_experts, pool);
  if (p->repack.matrices > 0) log(LogLevel::Info, p->repack.summary());
  p->model = std::move(m);
  return p;
}

std::optional<PreparedModelKey> prepared_model_key(const std::string& path, const std::string& mtp_path,
                                                   std::optional<model::KvType> kv_type, model::DrafterRequant requant,
                                                   cpu::RepackMode repack) {
  PreparedModelKey k;
  if (!identity_of(path, k.file)) return std::nullopt;
  if (!mtp_path.empty() && !identity_of(mtp_path, k.mtp_file)) return std::nullopt;
  k.kv_type = kv_type ? static_cast<int>(*kv_type) : -1;
  k.requant = static_cast<int>(requant);
  k.repack = static_cast<int>(repack);
  // `auto` repacks what the active path's kernels read faster; `on` / `off` do not look at the path.
  k.isa = repack == cpu::RepackMode::Auto ? static_cast<int>(cpu::active_isa()) : -1;
  return k;
}

std::shared_ptr<const PreparedModel> shared_prepared_model(
    const PreparedModelKey& key, const std::function<std::shared_ptr<PreparedModel>()>& make) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  std::erase_if(r.entries, [](const auto& e) { return e.second.expired(); });
  for (const auto& [k, weak] : r.entries)
    if (k == key)
      if (auto live = weak.lock()) return live;
  std::shared_ptr<const PreparedModel> made = make();
  r.entries.emplace_back(key, made);
  return made;
}

model::KvType auto_cpu_kv_type(const model::HParams& hp) {
  const bool float_cells =
      hp.kv_type == model::KvType::F32 && (hp.arch == model::Arch::Qwen3Moe || hp.arch == model::Arch::Glm4Moe);
  if (float_cells && hp.head_dim <= static_cast<uint32_t>(kMaxF16HeadDim) && cpu::isa_supported(cpu::Isa::Avx2))
    return model::KvType::F16;
  return hp.kv_type;
}

std::unique_ptr<model::Model> load_cpu_model(const std::string& path, const std::string& mtp_path,
                                             std::optional<model::KvType> kv_type) {
  std::unique_ptr<model::Model> m = model::Model::load(path, mtp_path);
  m->set_kv_type(kv_type ? *kv_type : auto_cpu_kv_type(m->hparams()));
  return m;
}

std::shared_ptr<const PreparedModel> shared_cpu_model(const std::string& path, const std::string& mtp_path,
                                                      std::optional<model::KvType> kv_type,
                                                      model::DrafterRequant requant, cpu::RepackMode repack,
                                                      int n_threads) {
  auto make = [&] {
    std::unique_ptr<ThreadPool> own;
    if (n_threads > 0) own = std::make_unique<ThreadPool>(n_threads);
    return prepare_cpu_model(load_cpu_model(path, mtp_path, kv_type), requant, repack, true,
                             own ? own.get() : &ThreadPool::global());
  };
  const std::optional<PreparedModelKey> key = prepared_model_key(path, mtp_path, kv_type, requant, repack);
  if (!key) return make();
  return shared_prepared_model(*key, make);
}

int prepared_models_alive() {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  int n = 0;
  for (const auto& e : r.entries) n += e.second.expired() ? 0 : 1;
  return n;
}

}  // namespace strata::engine
