#include "strata/experts/mapping_advice.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace strata::experts {

MappingAdvice& operator+=(MappingAdvice& a, const MappingAdvice& b) {
  a.applied = a.applied && b.applied;
  a.expert_bytes += b.expert_bytes;
  a.other_bytes += b.other_bytes;
  a.failures += b.failures;
  return a;
}

MappingAdvice advise_expert_mapping(const ExpertLayout& layout, int file, uint64_t file_size) {
  MappingAdvice out;
  const std::string& path = layout.file(file);
  if (!layout.has_file_offsets || path.empty() || file_size == 0) return out;
  // The mapping's base: every part's data pointer minus its file offset, the same for all parts.
  const uint8_t* base = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) file offsets of expert data
  for (const ExpertLayer& l : layout.layers) {
    if (l.file != file) continue;
    for (const ExpertTensor& t : l.part) {
      if (!t.view.data) return out;
      const uint8_t* b = static_cast<const uint8_t*>(t.view.data) - t.file_offset;
      if (base && b != base) return out;
      base = b;
      ranges.emplace_back(t.file_offset, t.file_offset + t.view.expert_stride * static_cast<uint64_t>(layout.n_expert));
    }
  }
  if (!base || ranges.empty()) return out;
  std::sort(ranges.begin(), ranges.end());
  const long pg = ::sysconf(_SC_PAGESIZE);
  const uint64_t page = pg > 0 ? static_cast<uint64_t>(pg) : 4096;
  auto* map = const_cast<uint8_t*>(base);
  out.applied = true;
  const uint64_t mapped = (file_size + page - 1) / page * page;
  if (::madvise(map, mapped, MADV_RANDOM) != 0) ++out.failures;

  // First every expert range out of the mapping and the page cache, then the read-ahead of the ranges
  // between them: a WILLNEED read still in flight while a neighbouring expert range is dropped could
  // otherwise leave that range's first pages cached.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<std::pair<uint64_t, uint64_t>> gaps;  // [begin, end) of the non-expert ranges, whole pages
  uint64_t cursor = 0;  // end of the last expert range (whole pages), where the next gap starts
  for (const auto& [begin, end] : ranges) {
    const uint64_t b = (begin + page - 1) / page * page;  // shrunk to whole pages
    const uint64_t e = end / page * page;
    if (b > cursor) gaps.emplace_back(cursor, b);
    if (e > b) {
      if (::madvise(map + b, e - b, MADV_DONTNEED) != 0) ++out.failures;
      if (fd >= 0 && ::posix_fadvise(fd, static_cast<off_t>(b), static_cast<off_t>(e - b), POSIX_FADV_DONTNEED) != 0)
        ++out.failures;
      out.expert_bytes += e - b;
    }
    cursor = std::max(cursor, std::max(b, e));
  }
  if (mapped > cursor) gaps.emplace_back(cursor, mapped);
  for (const auto& [b, e] : gaps) {
    if (::madvise(map + b, e - b, MADV_WILLNEED) != 0) ++out.failures;
    out.other_bytes += e - b;
  }
  if (fd >= 0)
    ::close(fd);
  else
    ++out.failures;
  return out;
}

}  // namespace strata::experts
