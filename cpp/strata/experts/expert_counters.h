#pragma once
// What the expert store counts, per window and per session (SPEC §2.5). One "use" is one
// (layer, expert) that a window's rows were routed to: an expert shared by several rows of a window
// is read once and counted once.
#include <cstdint>

namespace strata::experts {

struct ExpertCounters {
  uint64_t windows = 0;          // window runs (Window::run calls)
  uint64_t rows = 0;             // rows (token positions) in them
  uint64_t hits = 0;             // uses whose weights were resident (mmap mode: all pages in the page cache)
  uint64_t misses = 0;           // uses that needed a read (mmap mode: some pages outside the page cache)
  uint64_t prefetch_hits = 0;    // misses whose read had finished when the compute reached them
  uint64_t bytes_read = 0;       // expert bytes read from the file (mmap mode: bytes of non-resident pages)
  uint64_t io_bytes = 0;         // bytes the OS transferred (direct I/O reads whole aligned blocks)
  uint64_t stall_ns = 0;         // time the compute thread waited for reads
  uint64_t evictions = 0;        // resident experts dropped to make room
  uint64_t prefetch_reads = 0;   // experts read on the prediction of the layer before (counted in bytes_read)
  uint64_t prefetch_used = 0;    // of those, the ones their layer then used (counted as misses there)
  uint64_t draft_demotions = 0;  // releases of experts only draft rows used to the LRU end (draft_retention.h)

  ExpertCounters& operator+=(const ExpertCounters& o) {
    windows += o.windows;
    rows += o.rows;
    hits += o.hits;
    misses += o.misses;
    prefetch_hits += o.prefetch_hits;
    bytes_read += o.bytes_read;
    io_bytes += o.io_bytes;
    stall_ns += o.stall_ns;
    evictions += o.evictions;
    prefetch_reads += o.prefetch_reads;
    prefetch_used += o.prefetch_used;
    draft_demotions += o.draft_demotions;
    return *this;
  }
  ExpertCounters operator-(const ExpertCounters& o) const {
    ExpertCounters d;
    d.windows = windows - o.windows;
    d.rows = rows - o.rows;
    d.hits = hits - o.hits;
    d.misses = misses - o.misses;
    d.prefetch_hits = prefetch_hits - o.prefetch_hits;
    d.bytes_read = bytes_read - o.bytes_read;
    d.io_bytes = io_bytes - o.io_bytes;
    d.stall_ns = stall_ns - o.stall_ns;
    d.evictions = evictions - o.evictions;
    d.prefetch_reads = prefetch_reads - o.prefetch_reads;
    d.prefetch_used = prefetch_used - o.prefetch_used;
    d.draft_demotions = draft_demotions - o.draft_demotions;
    return d;
  }
};

}  // namespace strata::experts
