#pragma once
// Keeps the routed experts out of the page cache when the expert store streams them (stream mode).
//
// The model file stays memory-mapped for every other tensor. Without advice the kernel answers a page
// fault on a non-expert tensor with read-around (read_ahead_kb, often 128 KiB and up to several MiB on
// virtual disks), which pulls the neighbouring expert bytes into the page cache: read twice (once there,
// once by the store's own reads) and held outside the store's bound. So, for a file mapped whole at
// offset 0 (the GGUF reader's mapping; each file of the layout has its own):
//   1. MADV_RANDOM on the whole mapping: a fault reads only its own page;
//   2. MADV_WILLNEED on every range between expert ranges: the non-expert tensors (and the header) are
//      read ahead in bulk, exactly their pages;
//   3. MADV_DONTNEED on the expert ranges and POSIX_FADV_DONTNEED on the same file ranges: expert pages
//      that opening the model already pulled in are unmapped from this process and dropped from the
//      page cache where no other mapping uses them.
// Expert ranges are shrunk to whole pages: a page shared with a neighbouring tensor stays normal.
#include <cstdint>

#include "strata/experts/expert_layout.h"

namespace strata::experts {

struct MappingAdvice {
  bool applied = false;       // false: no mapping to advise (no data pointers, or not one whole-file mapping)
  uint64_t expert_bytes = 0;  // bytes advised as expert ranges (whole pages)
  uint64_t other_bytes = 0;   // bytes of the ranges between them (read ahead)
  int failures = 0;           // madvise/fadvise calls the kernel refused (the store still works)
};

// Applies the advice above to the mapping of layout.files[file] (file_size bytes) for the layers whose
// experts are in that file; a layout over several files is advised once per file. Never throws.
MappingAdvice advise_expert_mapping(const ExpertLayout& layout, int file, uint64_t file_size);
// Adds b's counts to a; applied only when both were.
MappingAdvice& operator+=(MappingAdvice& a, const MappingAdvice& b);

}  // namespace strata::experts
