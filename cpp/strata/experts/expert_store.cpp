#include "strata/experts/expert_store.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "strata/cpu/repack/repack.h"
#include "strata/experts/mapping_advice.h"
#include "strata/util/error.h"

namespace strata::experts {
namespace {

constexpr std::size_t kAlign = ExpertReader::kAlign;

// Room for span(offset, len) at any offset: the wanted bytes plus up to kAlign - 1 bytes of head,
// rounded up to whole blocks.
std::size_t region_bytes(std::size_t len) { return (len + 2 * kAlign - 2) / kAlign * kAlign; }

std::string mib(uint64_t b) {
  const double m = static_cast<double>(b) / (1024.0 * 1024.0);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f MiB", m);
  return buf;
}

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace

const char* expert_mode_name(ExpertMode m) { return m == ExpertMode::Stream ? "stream" : "mmap"; }

const char* prefetch_name(Prefetch p) { return p == Prefetch::On ? "on" : p == Prefetch::Off ? "off" : "auto"; }

ExpertStore::ExpertStore(ExpertLayout layout, const ExpertStoreConfig& cfg) : layout_(std::move(layout)), cfg_(cfg) {
  const int L = layout_.n_layers();
  const int64_t E = layout_.n_expert;
  if (L < 1) throw_error(ErrorKind::Value, "expert store: the model has no MoE layers");
  if (cfg.io_threads < 0 || cfg.io_threads > 64)
    throw_error(ErrorKind::Config,
                "expert store: io_threads = " + std::to_string(cfg.io_threads) + " must be in [0, 64]");
  if (!(cfg.cache_fraction >= 0.0 && cfg.cache_fraction <= 1.0))
    throw_error(ErrorKind::Config,
                "expert store: cache fraction " + std::to_string(cfg.cache_fraction) + " must be in [0, 1]");
  order_slot_.assign(static_cast<std::size_t>(E), -1);
  order_held_.assign(static_cast<std::size_t>(E), 0);

  if (cfg.mode == ExpertMode::Mmap) {
    layout_.validate(std::vector<uint64_t>(layout_.files.size(), ~uint64_t{0}));
    std::size_t max_part = 0;
    for (const ExpertLayer& l : layout_.layers)
      for (const ExpertTensor& t : l.part) {
        if (!t.view.data)
          throw_error(ErrorKind::Value, layout_.file(l.file) + ": mmap expert mode needs the tensors' data");
        max_part = std::max<std::size_t>(max_part, t.view.expert_stride);
      }
    const long pg = ::sysconf(_SC_PAGESIZE);
    page_ = pg > 0 ? static_cast<std::size_t>(pg) : 4096;
    if (cfg.page_cache_probe) mincore_vec_.assign(max_part / page_ + 2, 0);
    return;
  }

  bool have_files = layout_.has_file_offsets && layout_.n_files() > 0;
  for (const std::string& f : layout_.files) have_files = have_files && !f.empty();
  if (!have_files)
    throw_error(ErrorKind::Config, "expert store: stream mode reads experts from the model file, and this model (" +
                                       layout_.main_file() + ") has none; use mmap mode");
  std::vector<uint64_t> sizes;
  for (const std::string& f : layout_.files) {
    readers_.push_back(std::make_unique<ExpertReader>(f, cfg.direct_io));
    sizes.push_back(readers_.back()->file_size());
  }
  layout_.validate(sizes);
  // The expert bytes come only through the store: no read-around through the mappings (mapping_advice.h).
  for (int f = 0; f < layout_.n_files(); ++f) {
    const MappingAdvice a = advise_expert_mapping(layout_, f, sizes[static_cast<std::size_t>(f)]);
    if (f == 0)
      advice_ = a;
    else
      advice_ += a;
  }

  repack_part_.assign(static_cast<std::size_t>(L) * kExpertParts, 0);
  for (int l = 0; l < L; ++l)
    for (int p = 0; p < kExpertParts; ++p) {
      model::ExpertWeights& v = layout_.layers[static_cast<std::size_t>(l)].part[p].view;
      if (!cpu::should_repack(cfg.repack, v.type, v.rows)) continue;
      repack_part_[static_cast<std::size_t>(l) * kExpertParts + static_cast<std::size_t>(p)] = 1;
      v.type = cpu::repacked_type(v.type);
    }
  part_offset_.assign(static_cast<std::size_t>(L) * kExpertParts, 0);
  for (int l = 0; l < L; ++l) {
    std::size_t off = 0;
    for (int p = 0; p < kExpertParts; ++p) {
      part_offset_[static_cast<std::size_t>(l) * kExpertParts + static_cast<std::size_t>(p)] = off;
      off += region_bytes(layout_.layers[static_cast<std::size_t>(l)].part[p].view.expert_stride);
    }
    slot_bytes_ = std::max(slot_bytes_, off);
  }

  const int64_t total = total_experts();
  int64_t n = 0;
  if (cfg.cache_fraction > 0.0) {
    n = static_cast<int64_t>(std::ceil(cfg.cache_fraction * static_cast<double>(total) - 1e-9));
  } else if (cfg.cache_bytes == 0) {
    n = total;
  } else {
    n = static_cast<int64_t>(std::min<uint64_t>(cfg.cache_bytes / slot_bytes_, static_cast<uint64_t>(total)));
    if (n == 0)
      throw_error(ErrorKind::Config, "expert store: a cache of " + std::to_string(cfg.cache_bytes) +
                                         " bytes holds no expert (one expert takes " + std::to_string(slot_bytes_) +
                                         " bytes with its direct-I/O padding)");
  }
  n = std::clamp<int64_t>(n, 1, total);
  const std::size_t arena = static_cast<std::size_t>(n) * slot_bytes_;
  arena_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, arena));
  if (!arena_)
    throw_error(ErrorKind::Config, "expert store: cannot allocate the expert cache of " + mib(arena) + " (" +
                                       std::to_string(n) + " experts)");
  slots_.assign(static_cast<std::size_t>(n), Slot{});
  lru_ = IndexList(static_cast<int32_t>(n));
  free_.reserve(static_cast<std::size_t>(n));
  for (int64_t s = n - 1; s >= 0; --s) free_.push_back(static_cast<int32_t>(s));
  where_.assign(static_cast<std::size_t>(total), -1);
  resident_.assign(static_cast<std::size_t>(total), 0);
  queued_.assign(static_cast<std::size_t>(n) * kExpertParts, 0);
  prefetch_slots_.reserve(static_cast<std::size_t>(n));
  pf_cand_.assign(static_cast<std::size_t>(L), 0);
  pf_used_.assign(static_cast<std::size_t>(L), 0);
  shadow_.reserve(static_cast<std::size_t>(E));
  retention_ = std::make_unique<DraftRetention>(static_cast<int32_t>(total), static_cast<int32_t>(n));
  order_front_.assign(static_cast<std::size_t>(E), 0);
  io_ = std::make_unique<IoPool>(cfg.io_threads, static_cast<std::size_t>(n) * kExpertParts,
                                 [this](uint32_t job) { run_job(job); });
}

ExpertStore::~ExpertStore() {
  io_.reset();  // drains and joins the I/O threads (prefetches may still be reading into the arena)
  std::free(arena_);
}

bool ExpertStore::direct_io() const {
  if (readers_.empty()) return false;
  for (const auto& r : readers_)
    if (!r->direct()) return false;
  return true;
}

std::string ExpertStore::io_note() const {
  if (readers_.empty()) return "mmap";
  const std::string first = readers_[0]->note();
  bool same = true;
  for (const auto& r : readers_) same = same && r->note() == first;
  if (same) return first;
  std::string out;
  for (const auto& r : readers_) out += (out.empty() ? "" : "; ") + r->path() + ": " + r->note();
  return out;
}

ExpertReader* ExpertStore::reader(int file) {
  return file >= 0 && static_cast<std::size_t>(file) < readers_.size() ? readers_[static_cast<std::size_t>(file)].get()
                                                                       : nullptr;
}

const uint8_t* ExpertStore::resident_map(int layer) const {
  if (cfg_.mode != ExpertMode::Stream) return nullptr;
  if (layer < 0 || layer >= n_layers())
    throw_error(ErrorKind::Value, "expert store: layer " + std::to_string(layer) + " out of range");
  return resident_.data() + static_cast<std::size_t>(layer) * static_cast<std::size_t>(n_expert());
}

int64_t ExpertStore::resident_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (uint8_t r : resident_) n += r != 0;
  return n;
}

uint64_t ExpertStore::resident_bytes() const {
  if (cfg_.mode == ExpertMode::Stream) return static_cast<uint64_t>(resident_count()) * slot_bytes_;
  // The stacks' page ranges, merged: a repacked layer's gate and up interleave in one buffer, and a page
  // shared by two ranges counts once.
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
  for (const ExpertLayer& l : layout_.layers)
    for (const ExpertTensor& t : l.part) {
      const auto addr = reinterpret_cast<std::uintptr_t>(t.view.data);
      ranges.emplace_back(addr & ~static_cast<std::uintptr_t>(page_ - 1), addr + t.view.span_bytes());
    }
  std::sort(ranges.begin(), ranges.end());
  uint64_t bytes = 0;
  std::vector<unsigned char> vec;
  for (std::size_t i = 0; i < ranges.size();) {
    const std::uintptr_t start = ranges[i].first;
    std::uintptr_t end = ranges[i].second;
    for (++i; i < ranges.size() && ranges[i].first < end; ++i) end = std::max(end, ranges[i].second);
    const std::size_t length = static_cast<std::size_t>(end - start);
    vec.assign((length + page_ - 1) / page_, 0);
#if defined(__APPLE__)
    if (::mincore(reinterpret_cast<void*>(start), length, reinterpret_cast<char*>(vec.data())) != 0) continue;
#else
    if (::mincore(reinterpret_cast<void*>(start), length, vec.data()) != 0) continue;
#endif
    for (unsigned char v : vec) bytes += (v & 1) ? page_ : 0;
  }
  return bytes;
}

std::vector<int32_t> ExpertStore::lru_keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> out;
  for (int32_t s = lru_.front(); s >= 0; s = lru_.next(s)) out.push_back(slots_[static_cast<std::size_t>(s)].key);
  return out;
}

void ExpertStore::begin_window(int rows) {
  std::lock_guard<std::mutex> lock(mu_);
  window_start_ = totals_;
  totals_.windows += 1;
  totals_.rows += static_cast<uint64_t>(rows > 0 ? rows : 0);
}

bool ExpertStore::demotes_draft_experts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return retention_ && retention_->placement() != DraftPlacement::Keep;
}

void ExpertStore::end_window() {
  std::lock_guard<std::mutex> lock(mu_);
  last_ = totals_ - window_start_;
}

ExpertCounters ExpertStore::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return totals_;
}

ExpertCounters ExpertStore::last_window() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

void ExpertStore::reset_counters() {
  std::lock_guard<std::mutex> lock(mu_);
  totals_ = {};
  window_start_ = {};
  last_ = {};
}

void ExpertStore::clear() {
  std::unique_lock<std::mutex> lock(mu_);
  if (pass_open_) throw_error(ErrorKind::Value, "expert store: clear() while a layer is running");
  cv_.wait(lock, [&] { return in_flight_ == 0; });  // prefetches still reading
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].key >= 0) reset_slot(static_cast<int32_t>(s));
  prefetch_slots_.clear();
  shadow_.clear();
  shadow_layer_ = -1;
}

bool ExpertStore::prefetch_on_locked(int layer) const {
  if (cfg_.prefetch == Prefetch::On) return true;
  const uint32_t cand = pf_cand_[static_cast<std::size_t>(layer)];
  return cand < kPrefetchWarmup || 100 * static_cast<uint64_t>(pf_used_[static_cast<std::size_t>(layer)]) >=
                                       static_cast<uint64_t>(kPrefetchAutoPercent) * cand;
}

bool ExpertStore::prefetches() const {
  return cfg_.mode == ExpertMode::Stream && cfg_.prefetch != Prefetch::Off && io_threads() > 0;
}

bool ExpertStore::prefetch_reads_layer(int layer) const {
  if (!prefetches() || layer < 0 || layer >= n_layers()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return prefetch_on_locked(layer);
}

void ExpertStore::count_prediction(int layer, uint32_t cand, uint32_t used) {
  pf_cand_[static_cast<std::size_t>(layer)] += cand;
  pf_used_[static_cast<std::size_t>(layer)] += used;
}

void ExpertStore::decay_prediction(int layer) {
  uint32_t& c = pf_cand_[static_cast<std::size_t>(layer)];
  uint32_t& u = pf_used_[static_cast<std::size_t>(layer)];
  if (c > kPrecisionWindow) {  // older predictions weigh less; both halves after a prediction is scored
    c /= 2;
    u /= 2;
  }
}

int ExpertStore::prefetch(int layer, const uint8_t* want) {
  if (!prefetches() || !want || layer < 0 || layer >= n_layers()) return 0;
  const int64_t E = n_expert();
  int started = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only while a layer's pass is open (the one before `layer`, right after its own reads were queued),
    // and not while it still waits for slots.
    if (!pass_open_ || pass_next_issue_ < pass_n_) return 0;
    const bool read = prefetch_on_locked(layer);
    if (!read) shadow_.clear();
    shadow_layer_ = read ? -1 : layer;
    uint32_t issued = 0;
    auto predicted_resident = [&](int32_t s) {  // a slot of this prediction's layer that it names
      const int32_t k = slots_[static_cast<std::size_t>(s)].key;
      return k / E == layer && want[k % E];
    };
    if (read)  // the predicted experts already resident become the most recently used
      for (int64_t e = 0; e < E; ++e) {
        const int32_t s = want[e] ? where_[static_cast<std::size_t>(layer * E + e)] : -1;
        if (s >= 0 && lru_.contains(s)) {
          lru_.remove(s);
          lru_.push(s, /*at_front=*/false);
        }
      }
    for (int64_t e = 0; e < E; ++e) {
      if (!want[e]) continue;
      const int32_t key = static_cast<int32_t>(layer * E + e);
      if (where_[static_cast<std::size_t>(key)] >= 0) continue;  // resident or being read
      if (!read) {  // auto mode, imprecise here: only remember what would have been read
        shadow_.push_back(static_cast<int32_t>(e));
        continue;
      }
      // ... and never the victims: when only they are left to evict, the prediction stops here.
      if (free_.empty() && (lru_.front() < 0 || predicted_resident(lru_.front()))) break;
      const int32_t s = start_read(key);  // its pin is the store's, handed to the pass that uses it
      if (s < 0) break;
      slots_[static_cast<std::size_t>(s)].prefetched = true;
      resident_[static_cast<std::size_t>(key)] = 1;
      prefetch_slots_.push_back(s);
      ++totals_.prefetch_reads;
      ++started;
      ++issued;
    }
    if (read) count_prediction(layer, issued, 0);  // used ones are counted when the pass takes them
  }
  submit_queued();
  return started;
}

// ---- LRU and slots (under mu_)

void ExpertStore::release_to_lru(int32_t s, bool front) {
  lru_.push(s, front);
  if (front) ++totals_.draft_demotions;
}

int32_t ExpertStore::take_victim() {
  if (!free_.empty()) {
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  const int32_t s = lru_.front();
  if (s < 0) return -1;  // every slot is pinned by the running layer
  lru_.remove(s);
  Slot& sl = slots_[static_cast<std::size_t>(s)];
  where_[static_cast<std::size_t>(sl.key)] = -1;
  resident_[static_cast<std::size_t>(sl.key)] = 0;
  sl.key = -1;
  sl.state = kEmpty;
  ++totals_.evictions;
  return s;
}

void ExpertStore::reset_slot(int32_t s) {
  Slot& sl = slots_[static_cast<std::size_t>(s)];
  lru_.remove(s);
  if (sl.key >= 0) {
    where_[static_cast<std::size_t>(sl.key)] = -1;
    resident_[static_cast<std::size_t>(sl.key)] = 0;
  }
  sl.key = -1;
  sl.state = kEmpty;
  sl.pins = 0;
  sl.pending = 0;
  sl.prefetched = false;
  sl.error = nullptr;
  free_.push_back(s);
}

int32_t ExpertStore::start_read(int32_t key) {
  const int32_t s = take_victim();
  if (s < 0) return -1;
  Slot& sl = slots_[static_cast<std::size_t>(s)];
  sl.key = key;
  sl.state = kLoading;
  sl.pins = 1;
  sl.pending = kExpertParts;
  sl.error = nullptr;
  where_[static_cast<std::size_t>(key)] = s;
  in_flight_ += kExpertParts;
  for (int p = 0; p < kExpertParts; ++p)
    queued_[n_queued_++] = static_cast<uint32_t>(s) * kExpertParts + static_cast<uint32_t>(p);
  return s;
}

bool ExpertStore::issue(int i) {
  const int32_t s = start_read(static_cast<int32_t>(pass_layer_ * n_expert() + order_[static_cast<std::size_t>(i)]));
  if (s < 0) return false;
  order_slot_[static_cast<std::size_t>(i)] = s;
  order_held_[static_cast<std::size_t>(i)] = 1;
  return true;
}

void ExpertStore::issue_more() {
  while (pass_next_issue_ < pass_n_ && issue(pass_next_issue_)) ++pass_next_issue_;
}

void ExpertStore::submit_queued() {
  // Only the compute thread fills queued_, so it can be read without the lock.
  const std::size_t n = n_queued_;
  n_queued_ = 0;
  for (std::size_t j = 0; j < n; ++j) io_->submit(queued_[j]);
}

uint8_t* ExpertStore::slot_part(int32_t s, int layer, int part, int64_t e) const {
  const ExpertTensor& t = layout_.layers[static_cast<std::size_t>(layer)].part[part];
  const uint64_t off = t.file_offset + static_cast<uint64_t>(e) * t.view.expert_stride;
  return arena_ + static_cast<std::size_t>(s) * slot_bytes_ +
         part_offset_[static_cast<std::size_t>(layer) * kExpertParts + static_cast<std::size_t>(part)] +
         ExpertReader::head(off);
}

ExpertView ExpertStore::slot_view(int32_t s, int layer, int64_t e) const {
  ExpertView v;
  model::Weight* out[kExpertParts] = {&v.gate, &v.up, &v.down};
  for (int p = 0; p < kExpertParts; ++p) {
    const model::ExpertWeights& w = layout_.layers[static_cast<std::size_t>(layer)].part[p].view;
    *out[p] = model::Weight{w.type, slot_part(s, layer, p, e), w.rows, w.cols, w.row_stride};
  }
  return v;
}

void ExpertStore::run_job(uint32_t job) {
  const int32_t s = static_cast<int32_t>(job / kExpertParts);
  const int p = static_cast<int>(job % kExpertParts);
  // The slot's key does not change while it is loading.
  const int32_t key = slots_[static_cast<std::size_t>(s)].key;
  const int layer = static_cast<int>(key / n_expert());
  const int64_t e = key % n_expert();
  const ExpertTensor& t = layout_.layers[static_cast<std::size_t>(layer)].part[p];
  const uint64_t off = t.file_offset + static_cast<uint64_t>(e) * t.view.expert_stride;
  uint8_t* region = slot_part(s, layer, p, e) - ExpertReader::head(off);
  std::exception_ptr err;
  uint64_t io = 0;
  try {
    ExpertReader& reader = *readers_[static_cast<std::size_t>(layout_.layers[static_cast<std::size_t>(layer)].file)];
    io = reader.read(off, t.view.expert_stride, region, ReadWhat{layer, static_cast<int>(e), expert_part_name(p)});
    if (repack_part_[static_cast<std::size_t>(layer) * kExpertParts + static_cast<std::size_t>(p)])
      cpu::repack_rows_in_place(cpu::plain_type(t.view.type), region + ExpertReader::head(off), t.view.rows,
                                t.view.cols);
  } catch (...) {
    err = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& sl = slots_[static_cast<std::size_t>(s)];
    if (err) {
      // Moved under the lock: this thread keeps no reference once the compute thread may see it.
      if (!sl.error) sl.error = std::move(err);
      err = nullptr;
    } else {
      totals_.bytes_read += t.view.expert_stride;
      totals_.io_bytes += io;
    }
    if (--sl.pending == 0) {
      sl.state = sl.error ? kFailed : kReady;
      // A prefetched expert is marked at its start: no write here while a router may read the map.
      if (!sl.error && !resident_[static_cast<std::size_t>(key)]) resident_[static_cast<std::size_t>(key)] = 1;
    }
    --in_flight_;
  }
  cv_.notify_all();
}

void ExpertStore::probe_page_cache(const ExpertView& v, int layer) {
  if (mincore_vec_.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++totals_.hits;
    return;
  }
  uint64_t missing = 0;
  const model::Weight* parts[kExpertParts] = {&v.gate, &v.up, &v.down};
  for (int p = 0; p < kExpertParts; ++p) {
    const auto addr = reinterpret_cast<std::uintptr_t>(parts[p]->data);
    const std::size_t len = layout_.layers[static_cast<std::size_t>(layer)].part[p].view.expert_stride;
    const std::uintptr_t start = addr & ~static_cast<std::uintptr_t>(page_ - 1);
    const std::size_t length = static_cast<std::size_t>(addr + len - start);
    const std::size_t pages = (length + page_ - 1) / page_;
    if (pages > mincore_vec_.size()) continue;  // cannot happen: sized for the largest part
#if defined(__APPLE__)
    const int rc = ::mincore(reinterpret_cast<void*>(start), length, reinterpret_cast<char*>(mincore_vec_.data()));
#else
    const int rc = ::mincore(reinterpret_cast<void*>(start), length, mincore_vec_.data());
#endif
    if (rc != 0) continue;  // not probeable: counted as resident
    for (std::size_t i = 0; i < pages; ++i)
      if (!(mincore_vec_[i] & 1)) missing += page_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (missing) {
    ++totals_.misses;
    totals_.bytes_read += missing;
    totals_.io_bytes += missing;
  } else {
    ++totals_.hits;
  }
}

// ---- LayerPass

LayerPass::LayerPass(ExpertStore* store, int layer, const model::MoeWeights& w, const int32_t* count, int64_t n_expert,
                     int32_t* order, const uint8_t* target_used)
    : store_(store), stream_(store && store->mode() == ExpertMode::Stream), layer_(layer), w_(w), order_(order) {
  if (store_ && (layer < 0 || layer >= store_->n_layers() || n_expert != store_->n_expert()))
    throw_error(ErrorKind::Internal, "LayerPass: layer " + std::to_string(layer) + " / " + std::to_string(n_expert) +
                                         " experts do not match the expert store");
  if (!stream_) {
    for (int64_t e = 0; e < n_expert; ++e)
      if (count[e] > 0) order_[n_++] = static_cast<int32_t>(e);
    return;
  }
  ExpertStore& st = *store_;
  {
    std::unique_lock<std::mutex> lock(st.mu_);
    if (st.pass_open_) throw_error(ErrorKind::Internal, "LayerPass: another layer pass is open");
    // Every pending prediction (prefetch_slots_) was made for this layer, or for one that did not run
    // next: the pass takes the prefetched slots it routed to below and releases the rest before reading
    // its own misses.
    // A prediction recorded without reading (auto mode): how much of it this layer uses.
    if (st.shadow_layer_ == layer) {
      uint32_t used = 0;
      for (int32_t e : st.shadow_) used += count[e] > 0;
      st.count_prediction(layer, static_cast<uint32_t>(st.shadow_.size()), used);
    }
    st.shadow_layer_ = -1;
    st.shadow_.clear();
    // Compute order: resident experts, then the prefetched ones (their reads started a layer ago), then
    // the misses. `where` says which: a slot that is not a prefetch's is ready (reads of earlier passes
    // have finished).
    const int32_t* where = st.where_.data() + static_cast<std::size_t>(layer) * static_cast<std::size_t>(n_expert);
    auto kind = [&](int64_t e) {  // 0 resident, 1 prefetched, 2 missing
      const int32_t s = where[e];
      return s < 0 ? 2 : st.slots_[static_cast<std::size_t>(s)].prefetched ? 1 : 0;
    };
    for (int k = 0; k < 3; ++k)
      for (int64_t e = 0; e < n_expert; ++e)
        if (count[e] > 0 && kind(e) == k) order_[n_++] = static_cast<int32_t>(e);
    for (int i = 0; i < n_; ++i) {
      st.order_slot_[static_cast<std::size_t>(i)] = -1;
      st.order_held_[static_cast<std::size_t>(i)] = 0;
    }
    int hits = 0, adopted = 0;
    for (int i = 0; i < n_; ++i) {
      const int32_t s = where[order_[i]];
      if (s < 0) break;
      ExpertStore::Slot& sl = st.slots_[static_cast<std::size_t>(s)];
      if (sl.prefetched) {
        sl.prefetched = false;  // the store's pin becomes the pass's
        ++adopted;
      } else {
        st.lru_.remove(s);
        ++sl.pins;
        ++hits;
      }
      st.order_slot_[static_cast<std::size_t>(i)] = s;
      st.order_held_[static_cast<std::size_t>(i)] = 1;
    }
    // Every use goes to the retention duel; the pass releases the experts only draft rows used to the
    // LRU end while the duel says that reads less.
    for (int i = 0; i < n_; ++i) {
      const int32_t e = order_[i];
      const bool draft_only = target_used && !target_used[e];
      st.retention_->use(static_cast<int32_t>(layer * n_expert + e), draft_only);
      st.order_front_[static_cast<std::size_t>(i)] = draft_only && st.retention_->at_front(/*read=*/i >= hits);
    }
    st.totals_.hits += static_cast<uint64_t>(hits);
    st.totals_.misses += static_cast<uint64_t>(n_ - hits);
    st.totals_.prefetch_used += static_cast<uint64_t>(adopted);
    if (adopted) st.count_prediction(layer, 0, static_cast<uint32_t>(adopted));
    st.decay_prediction(layer);
    // The unused predictions go to the front of the LRU list (the first to be evicted) once read: so the
    // pass's misses find their slots (a tiny cache may need them) and the eviction order does not depend
    // on when those reads finish. Waiting for them is stall time.
    auto stale_loading = [&] {
      for (int32_t s : st.prefetch_slots_) {
        const ExpertStore::Slot& sl = st.slots_[static_cast<std::size_t>(s)];
        if (sl.prefetched && sl.state == ExpertStore::kLoading) return true;
      }
      return false;
    };
    if (stale_loading()) {
      const uint64_t t0 = now_ns();
      st.cv_.wait(lock, [&] { return !stale_loading(); });
      st.totals_.stall_ns += now_ns() - t0;
    }
    for (int32_t s : st.prefetch_slots_) {
      ExpertStore::Slot& sl = st.slots_[static_cast<std::size_t>(s)];
      if (!sl.prefetched) continue;  // taken by this pass
      sl.prefetched = false;
      sl.pins = 0;
      if (sl.state == ExpertStore::kFailed)
        st.reset_slot(s);
      else
        st.lru_.push(s, /*at_front=*/true);
    }
    st.prefetch_slots_.clear();
    st.order_ = order_;
    st.pass_open_ = true;
    st.pass_layer_ = layer;
    st.pass_n_ = n_;
    st.pass_hits_ = hits;
    st.pass_next_issue_ = hits + adopted;
    st.issue_more();
  }
  st.submit_queued();
}

LayerPass::~LayerPass() {
  if (!stream_) return;
  ExpertStore& st = *store_;
  std::unique_lock<std::mutex> lock(st.mu_);
  // The reads this pass holds (the next layer's prefetches, started while it ran, go on).
  st.cv_.wait(lock, [&] {
    for (int i = 0; i < st.pass_n_; ++i)
      if (st.order_held_[static_cast<std::size_t>(i)] &&
          st.slots_[static_cast<std::size_t>(st.order_slot_[static_cast<std::size_t>(i)])].state ==
              ExpertStore::kLoading)
        return false;
    return true;
  });
  for (int i = 0; i < st.pass_n_; ++i) {
    if (!st.order_held_[static_cast<std::size_t>(i)]) continue;
    const int32_t s = st.order_slot_[static_cast<std::size_t>(i)];
    ExpertStore::Slot& sl = st.slots_[static_cast<std::size_t>(s)];
    if (sl.state == ExpertStore::kFailed) {
      st.reset_slot(s);
    } else if (--sl.pins == 0) {
      st.release_to_lru(s, st.order_front_[static_cast<std::size_t>(i)] != 0);
    }
    st.order_held_[static_cast<std::size_t>(i)] = 0;
  }
  st.pass_open_ = false;
  st.pass_n_ = 0;
  st.order_ = nullptr;
}

void LayerPass::release_batch() {
  if (!stream_ || end_ <= begin_) return;
  ExpertStore& st = *store_;
  {
    std::lock_guard<std::mutex> lock(st.mu_);
    for (int j = begin_; j < end_; ++j) {
      if (!st.order_held_[static_cast<std::size_t>(j)]) continue;
      const int32_t s = st.order_slot_[static_cast<std::size_t>(j)];
      if (--st.slots_[static_cast<std::size_t>(s)].pins == 0)
        st.release_to_lru(s, st.order_front_[static_cast<std::size_t>(j)] != 0);
      st.order_held_[static_cast<std::size_t>(j)] = 0;
    }
    st.issue_more();
  }
  st.submit_queued();
}

bool LayerPass::next_batch() {
  if (!stream_) {
    // One batch of every expert, straight from the mapping.
    if (end_ > 0 || n_ == 0) return false;
    begin_ = 0;
    end_ = n_;
    if (store_)
      for (int j = 0; j < n_; ++j) store_->probe_page_cache(view(j), layer_);
    return true;
  }
  ExpertStore& st = *store_;
  release_batch();
  if (end_ >= n_) return false;
  begin_ = end_;
  std::unique_lock<std::mutex> lock(st.mu_);
  if (begin_ < st.pass_hits_) {  // the resident experts, pinned since the pass began
    end_ = st.pass_hits_;
    return true;
  }
  const std::size_t b = static_cast<std::size_t>(begin_);
  if (st.order_slot_[b] < 0) {
    // A miss deferred for want of a free slot: every earlier expert has been released by now.
    st.issue_more();
    if (st.order_slot_[b] < 0) throw_error(ErrorKind::Internal, "expert store: no slot for a deferred expert");
    lock.unlock();
    st.submit_queued();
    lock.lock();
  }
  ExpertStore::Slot& first = st.slots_[static_cast<std::size_t>(st.order_slot_[b])];
  if (first.state == ExpertStore::kLoading) {
    const uint64_t t0 = now_ns();
    st.cv_.wait(lock, [&] { return first.state != ExpertStore::kLoading; });
    st.totals_.stall_ns += now_ns() - t0;
  } else {
    ++st.totals_.prefetch_hits;
  }
  // The batch: the first miss and every following issued miss whose read is already done.
  end_ = begin_ + 1;
  while (end_ < st.pass_next_issue_) {
    const int32_t s = st.order_slot_[static_cast<std::size_t>(end_)];
    if (st.slots_[static_cast<std::size_t>(s)].state == ExpertStore::kLoading) break;
    ++st.totals_.prefetch_hits;
    ++end_;
  }
  for (int j = begin_; j < end_; ++j) {
    const int32_t s = st.order_slot_[static_cast<std::size_t>(j)];
    ExpertStore::Slot& sl = st.slots_[static_cast<std::size_t>(s)];
    if (sl.state != ExpertStore::kFailed) continue;
    std::exception_ptr err = sl.error;
    st.reset_slot(s);
    st.order_held_[static_cast<std::size_t>(j)] = 0;
    std::rethrow_exception(err);
  }
  return true;
}

ExpertView LayerPass::view(int j) const {
  const int64_t e = order_[j];
  if (!stream_) return ExpertView{w_.gate.expert(e), w_.up.expert(e), w_.down.expert(e)};
  return store_->slot_view(store_->order_slot_[static_cast<std::size_t>(j)], layer_, e);
}

}  // namespace strata::experts
