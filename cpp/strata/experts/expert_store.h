#pragma once
// The expert store (SPEC §2.5): where the routed experts' weights come from.
//
//   mmap   — "trust the OS": the weights are views into the file's mapping (today's behaviour). No
//            residency map goes to the router. Counters count every use ("touches", as hits); with
//            the page-cache probe on (mincore) a use whose pages were not all cached is a miss.
//   stream — a bounded resident set: an arena of slots allocated once (capacity in bytes → slots of
//            one expert each, the three matrices of a (layer, expert) side by side). Misses are read
//            with positioned reads (ExpertReader: direct I/O where allowed; one reader per file of the
//            layout, e.g. deepseek4's model and MTP files) on a few I/O threads,
//            eviction is LRU among unpinned slots, and the residency map (one byte per expert and
//            layer) is what the router reads. The file mapping is advised so that the expert bytes
//            never enter the page cache through it (mapping_advice.h).
//
// A MoE layer uses the store through a LayerPass (one per layer and window): constructed after the
// router has run, it orders the layer's experts resident first (the R-2 plan's order), pins the
// resident ones and starts the reads of the missing ones at once, so the compute works through the
// resident experts (the first batch) while the misses load; later batches are runs of loaded misses.
// Releasing a batch makes its experts the most recently used; waiting for a read is stall time.
// When the layer needs more experts than there are free slots, later misses start as earlier
// batches are released. The destructor waits for every read it started, also when an exception
// unwinds the layer.
//
// Nothing is allocated per token. One thread drives the store at a time (the engine's mutex).
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/cpu/cpu_settings.h"
#include "strata/experts/draft_retention.h"
#include "strata/experts/expert_counters.h"
#include "strata/experts/expert_layout.h"
#include "strata/experts/expert_mode.h"
#include "strata/experts/expert_reader.h"
#include "strata/experts/index_list.h"
#include "strata/experts/io_pool.h"
#include "strata/experts/mapping_advice.h"
#include "strata/experts/route_trace.h"
#include "strata/model/weights.h"

namespace strata::experts {

struct ExpertStoreConfig {
  ExpertMode mode = ExpertMode::Mmap;
  uint64_t cache_bytes = 0;     // stream: resident-set capacity in bytes; 0 = room for every expert
  double cache_fraction = 0.0;  // stream: when > 0, ceil(fraction × all experts) slots (cache_bytes ignored)
  DirectIo direct_io = DirectIo::Auto;
  int io_threads = 4;  // stream: reader threads; 0 = read on the compute thread (no overlap)
  // stream: repack slices of a type with a repacked form (Q4_0, Q5_0, Q5_1, Q8_0, the K-quants, IQ4_XS, IQ4_NL) as they
  // arrive (cpu/repack/repack.h; the slot views then have the repacked type). mmap mode: the model's views are used as
  // they are (the Runner repacks them).
  cpu::RepackMode repack = cpu::RepackMode::Off;
  // stream, with I/O threads: start the reads of the experts a MoE layer predicts for the next one
  // (ExpertStore::prefetch) while it computes; auto = per layer, while the prediction is precise enough.
  Prefetch prefetch = Prefetch::Auto;
  bool page_cache_probe = false;  // mmap: count uses whose pages were not in the page cache (mincore,
                                  // ~3 µs per expert use; the benchmark's mmap run turns it on)
};

// The weights of one expert: views into the mapping (mmap) or into a slot (stream).
struct ExpertView {
  model::Weight gate, up, down;
};

class ExpertStore {
 public:
  ExpertStore(ExpertLayout layout, const ExpertStoreConfig& cfg);
  ~ExpertStore();
  ExpertStore(const ExpertStore&) = delete;
  ExpertStore& operator=(const ExpertStore&) = delete;

  ExpertMode mode() const { return cfg_.mode; }
  const ExpertStoreConfig& config() const { return cfg_; }
  const ExpertLayout& layout() const { return layout_; }
  int n_layers() const { return layout_.n_layers(); }
  int64_t n_expert() const { return layout_.n_expert; }
  int64_t total_experts() const { return static_cast<int64_t>(n_layers()) * n_expert(); }
  // stream: bytes of one slot (the three matrices, each padded to whole 4 KiB blocks for direct I/O);
  // the slots; their total. mmap: 0.
  std::size_t slot_bytes() const { return slot_bytes_; }
  int64_t n_slots() const { return static_cast<int64_t>(slots_.size()); }
  uint64_t capacity_bytes() const { return static_cast<uint64_t>(slot_bytes_) * slots_.size(); }
  bool direct_io() const;       // stream mode, and every file's reader reads with direct I/O
  std::string io_note() const;  // "direct I/O (O_DIRECT)", "buffered pread (...)", "mmap"; per file when they differ
  int io_threads() const { return io_ ? io_->threads() : 0; }
  // stream: what advise_expert_mapping did to the files' mappings, summed (mapping_advice.h); mmap: nothing.
  const MappingAdvice& mapping_advice() const { return advice_; }

  // The router's residency map of a layer: E bytes, 1 = resident. It changes only inside a
  // LayerPass, so between passes (when the router runs) it is stable; while layer l's pass is open,
  // the entries of other layers are written by the compute thread alone (evictions, prefetch), so
  // the next layer's prediction may read them. nullptr in mmap mode.
  const uint8_t* resident_map(int layer) const;
  int64_t resident_count() const;
  // Memory the experts occupy now: stream, the slots in use (slot bytes each); mmap, the expert
  // tensors' pages in the page cache (mincore; 0 where it cannot tell). Allocates (not per token).
  uint64_t resident_bytes() const;
  // Resident (layer·E + expert) keys from least to most recently used (tests, inspection).
  std::vector<int32_t> lru_keys() const;

  // Starts the reads of the experts of `layer` marked in want[0 .. E) that are neither resident nor being
  // read, into free or least recently used slots: the engine's prediction of the next MoE layer's experts,
  // made while the layer before it runs (docs/experts.md, "Prefetch"); called while that layer's pass is
  // open, after its constructor. The predicted experts already resident become the most recently used, and
  // no read of the prediction evicts one (it stops when only they are left to evict). A
  // prefetched expert counts as resident from here on, so the router's map does not depend on when its
  // read finishes; its slot stays held until `layer`'s pass opens, which takes it or, unused, waits for
  // its read and releases it as the least recently used, so eviction does not depend on timing either.
  // Nothing happens in mmap mode, without I/O threads, with the setting off, with no pass open, or while
  // the open pass still waits for slots. In auto mode a layer whose predictions' precision (of
  // the experts they would read, the share its pass then used; decayed, counted also while it does not
  // read) is below kPrefetchAutoPercent after kPrefetchWarmup predicted reads only records its
  // predictions. Returns the reads started.
  int prefetch(int layer, const uint8_t* want);
  static constexpr int kPrefetchAutoPercent = 70;
  static constexpr uint32_t kPrefetchWarmup = 32;
  // Whether this store prefetches at all: stream mode, the setting not off, reader threads.
  bool prefetches() const;
  // Whether prefetch(layer, ...) would read now (prefetches(), and in auto mode the layer's precision).
  bool prefetch_reads_layer(int layer) const;

  // Counters. The window calls begin_window(rows) / end_window() around each run.
  void begin_window(int rows);
  void end_window();
  ExpertCounters totals() const;
  ExpertCounters last_window() const;  // the counters of the last completed window
  // Whether experts only draft rows used now go to the LRU end (draft_retention.h); false in mmap mode.
  bool demotes_draft_experts() const;
  void reset_counters();

  // Test hooks: the reader of layout().files[file] (stream mode; nullptr in mmap mode or out of range)
  // and the routing trace.
  ExpertReader* reader(int file = 0);
  RouteTrace& trace() { return trace_; }
  // Drops every resident expert (stream), e.g. to start a measurement cold.
  void clear();

 private:
  friend class LayerPass;
  enum SlotState : uint8_t { kEmpty, kLoading, kReady, kFailed };
  struct Slot {
    int32_t key = -1;
    SlotState state = kEmpty;
    int32_t pins = 0;
    int pending = 0;          // parts still being read
    bool prefetched = false;  // read on a prediction, held by the store until a pass uses or releases it
    std::exception_ptr error;
  };

  // stream internals (all under mu_)
  void release_to_lru(int32_t s, bool front);  // an unpinned slot back to the LRU list (front: evicted first)
  int32_t take_victim();                       // a free slot or the least recently used unpinned one; -1 if none
  int32_t start_read(int32_t key);             // a victim slot for key, pinned once, its parts queued; -1 if none
  bool issue(int i);                           // starts the read of pass entry i; false when no slot is free
  void issue_more();                           // starts deferred misses while slots are free
  void submit_queued();                        // hands collected jobs to the I/O pool (without the lock)
  void reset_slot(int32_t s);                  // back to empty and free
  void run_job(uint32_t job);                  // I/O thread: one part of one expert
  uint8_t* slot_part(int32_t s, int layer, int part, int64_t e) const;
  ExpertView slot_view(int32_t s, int layer, int64_t e) const;
  ExpertView mmap_view(int layer, int64_t e) const;
  void probe_page_cache(const ExpertView& v, int layer);

  ExpertLayout layout_;
  ExpertStoreConfig cfg_;
  std::vector<std::unique_ptr<ExpertReader>> readers_;  // stream: [file], the same direct-I/O setting
  MappingAdvice advice_;
  std::size_t slot_bytes_ = 0;
  std::vector<std::size_t> part_offset_;  // [layer][part] byte offset of a part's region in a slot
  std::vector<uint8_t> repack_part_;      // [layer][part] 1: slices are repacked on arrival
  uint8_t* arena_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<int32_t> where_;     // key -> slot, -1
  std::vector<uint8_t> resident_;  // key -> 1 when resident
  std::vector<int32_t> free_;      // empty slots (a stack)
  IndexList lru_;                  // the unpinned ready slots, least recently used first

  // The pass in progress (one at a time).
  bool pass_open_ = false;
  int pass_layer_ = -1;
  int pass_n_ = 0;
  int pass_hits_ = 0;
  int pass_next_issue_ = 0;
  int32_t* order_ = nullptr;         // the pass's order (the caller's buffer)
  std::vector<int32_t> order_slot_;  // [E] slot once issued or hit, -1 before
  std::vector<uint8_t> order_held_;  // [E] 1 while the pass holds a pin on it
  std::vector<uint32_t> queued_;     // jobs collected under the lock, submitted after it
  std::size_t n_queued_ = 0;
  int in_flight_ = 0;  // parts being read
  // Prefetched slots of the pending prediction, until the next pass takes or releases them. Capacity
  // reserved for every slot: no allocation per token.
  std::vector<int32_t> prefetch_slots_;
  // Per layer, the prediction's would-be reads and how many its pass used (auto mode's precision, halved
  // past kPrecisionWindow); the predictions recorded without reading (shadow_layer_'s experts).
  static constexpr uint32_t kPrecisionWindow = 512;
  std::vector<uint32_t> pf_cand_, pf_used_;
  std::vector<int32_t> shadow_;
  int shadow_layer_ = -1;
  // Where experts only draft rows used go on release (draft_retention.h); stream mode only.
  std::unique_ptr<DraftRetention> retention_;
  std::vector<uint8_t> order_front_;  // [E] 1: the pass releases order[i] to the LRU end
  bool prefetch_on_locked(int layer) const;
  void count_prediction(int layer, uint32_t cand, uint32_t used);
  void decay_prediction(int layer);

  // mmap page-cache probe
  std::size_t page_ = 4096;
  std::vector<unsigned char> mincore_vec_;

  ExpertCounters totals_, window_start_, last_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  RouteTrace trace_;
  std::unique_ptr<IoPool> io_;  // last: its threads stop before the rest is destroyed
};

// The experts of one MoE layer in one window. store may be nullptr (plain mmap views, nothing
// counted). count[e] > 0 marks the experts the window's rows were routed to; `order` (E ints of the
// caller's scratch) receives them in compute order: ascending id, or with a streaming store the
// resident ones first. The compute walks batches — contiguous ranges of `order` whose weights are
// ready — so a fused dispatch can run a whole batch: without a store or in mmap mode there is one
// batch of every expert; in stream mode the resident experts form the first batch (computed while
// the misses load), then each batch is the longest run of loaded misses (waiting for the first).
class LayerPass {
 public:
  // target_used (optional, E bytes): in a verification window, 1 for the experts its target rows use; the
  // pass's other experts only draft rows use, and are released as draft_retention.h decides. nullptr:
  // every use is a target row's.
  LayerPass(ExpertStore* store, int layer, const model::MoeWeights& w, const int32_t* count, int64_t n_expert,
            int32_t* order, const uint8_t* target_used = nullptr);
  ~LayerPass();
  LayerPass(const LayerPass&) = delete;
  LayerPass& operator=(const LayerPass&) = delete;

  int size() const { return n_; }
  const int32_t* order() const { return order_; }
  // Releases the current batch (its experts become the most recently used) and makes the next one
  // current, waiting until at least its first expert is loaded. False when every expert has been
  // visited. Throws Error(IO) when a read of the batch failed.
  bool next_batch();
  int batch_begin() const { return begin_; }
  int batch_end() const { return end_; }
  // The weights of order[j], j in the current batch.
  ExpertView view(int j) const;

 private:
  void release_batch();

  ExpertStore* store_;
  bool stream_;
  int layer_;
  const model::MoeWeights& w_;
  int32_t* order_;
  int n_ = 0;
  int begin_ = 0, end_ = 0;  // the current batch; end_ = 0 before the first
};

}  // namespace strata::experts
