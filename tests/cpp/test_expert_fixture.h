#pragma once
// Shared by the expert-store tests: a temporary file whose bytes are a known function of the
// position, and an expert layout over it (L layers × E experts × 3 F32 matrices at deliberately
// unaligned offsets), so every byte a view exposes can be checked against the file.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "strata/experts/expert_layout.h"

namespace strata_test {

inline uint8_t file_byte(uint64_t pos) { return static_cast<uint8_t>((pos * 2654435761u) >> 13); }

class TempFile {
 public:
  explicit TempFile(uint64_t size, const char* dir = nullptr) {
    std::string tmpl =
        std::string(dir ? dir : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp")) + "/strata-expert-XXXXXX";
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd < 0) std::abort();
    path_ = name.data();
    std::vector<uint8_t> buf(size);
    for (uint64_t i = 0; i < size; ++i) buf[i] = file_byte(i);
    std::size_t done = 0;
    while (done < buf.size()) {
      const ssize_t w = ::write(fd, buf.data() + done, buf.size() - done);
      if (w <= 0) std::abort();
      done += static_cast<std::size_t>(w);
    }
    ::close(fd);
    size_ = size;
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  void truncate(uint64_t n) {
    if (::truncate(path_.c_str(), static_cast<off_t>(n)) != 0) std::abort();
  }

 private:
  std::string path_;
  uint64_t size_ = 0;
};

// L layers, E experts; part p of layer l is an F32 [E, rows_p, cols] tensor starting at an odd
// offset. Returns the layout (view.data = nullptr unless base is given: then views point into base,
// the mapping of the same file).
inline strata::experts::ExpertLayout make_layout(const std::string& path, int L, int E, int rows, int cols,
                                                 uint64_t* file_size_out, const uint8_t* base = nullptr) {
  strata::experts::ExpertLayout lay;
  lay.files = {path};
  lay.n_expert = E;
  lay.has_file_offsets = true;
  uint64_t off = 4096 + 123;  // unaligned start
  for (int l = 0; l < L; ++l) {
    strata::experts::ExpertLayer layer;
    for (int p = 0; p < strata::experts::kExpertParts; ++p) {
      const int r = rows + p;  // the three matrices differ in size
      strata::model::ExpertWeights w;
      w.type = strata::quant::GGMLType::F32;
      w.n_expert = E;
      w.rows = r;
      w.cols = cols;
      w.row_stride = static_cast<std::size_t>(cols) * 4;
      w.expert_stride = w.row_stride * static_cast<std::size_t>(r);
      w.data = base ? base + off : nullptr;
      layer.part[p].view = w;
      layer.part[p].file_offset = off;
      off += w.expert_stride * static_cast<uint64_t>(E) + 36 + static_cast<uint64_t>(l * 7 + p);  // gaps, odd
    }
    lay.layers.push_back(layer);
  }
  *file_size_out = off + 100;
  return lay;
}

// True when w holds exactly the file bytes of expert e's part.
inline bool view_matches(const strata::model::Weight& w, const strata::experts::ExpertTensor& t, int64_t e) {
  const uint64_t off = t.file_offset + static_cast<uint64_t>(e) * t.view.expert_stride;
  for (std::size_t i = 0; i < t.view.expert_stride; ++i)
    if (w.data[i] != file_byte(off + i)) return false;
  return w.rows == t.view.rows && w.cols == t.view.cols && w.row_stride == t.view.row_stride;
}

}  // namespace strata_test
