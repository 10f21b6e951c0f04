// One source, two targets, checked on the sources themselves:
//   - the .metal entry points and the emulator's entry table name the same kernels;
//   - kernel bodies (metal/kernels/*.h) never declare threadgroup memory: it is passed in as TGP(T);
//   - every body header compiles in C++ on its own (this file includes them all).
#define STRATA_TEST_MAIN
#include "check.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <cctype>
#include <string>
#include <vector>

#include "metal/emu/kernels_emu.h"

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Removes // comments (the bodies use no block comments).
std::string strip_comments(const std::string& src) {
  std::string out;
  std::istringstream in(src);
  for (std::string line; std::getline(in, line);) {
    const auto c = line.find("//");
    out += (c == std::string::npos ? line : line.substr(0, c)) + "\n";
  }
  return out;
}

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Every identifier that follows `prefix` (whitespace allowed between), e.g. "kernel void" -> names.
std::vector<std::string> names_after(const std::string& src, const std::string& w1, const std::string& w2) {
  std::vector<std::string> out;
  for (size_t at = src.find(w1); at != std::string::npos; at = src.find(w1, at + 1)) {
    if (at > 0 && ident_char(src[at - 1])) continue;
    size_t i = at + w1.size();
    if (ident_char(w1.back()) && i < src.size() && ident_char(src[i])) continue;  // a longer word
    if (!w2.empty()) {
      while (i < src.size() && std::isspace(static_cast<unsigned char>(src[i]))) ++i;
      if (src.compare(i, w2.size(), w2) != 0) continue;
      i += w2.size();
    }
    while (i < src.size() && std::isspace(static_cast<unsigned char>(src[i]))) ++i;
    size_t j = i;
    while (j < src.size() && ident_char(src[j])) ++j;
    if (j > i) out.push_back(src.substr(i, j - i));
  }
  return out;
}

}  // namespace

TEST(metal_entry_points_match_the_emulator_table) {
  const std::filesystem::path dir = std::filesystem::path(STRATA_METAL_SOURCE_DIR) / "kernels";
  std::set<std::string> metal_names;
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".metal") continue;
    ++files;
    const std::string src = strip_comments(read(e.path()));
    for (const std::string& n : names_after(src, "kernel", "void"))
      if (n.rfind("strata_", 0) == 0) metal_names.insert(n);
    for (const std::string& n : names_after(src, "STRATA_GEMV_ENTRIES(", "")) {
      metal_names.insert("strata_gemv_" + n);
      metal_names.insert("strata_get_rows_" + n);
      metal_names.insert("strata_moe_gemv_" + n);
    }
  }
  // The macro's own definition line: `kernel void strata_gemv_##suffix(` and `STRATA_GEMV_ENTRIES(suffix, F)`.
  metal_names.erase("strata_gemv_");
  metal_names.erase("strata_get_rows_");
  metal_names.erase("strata_moe_gemv_");
  metal_names.erase("strata_gemv_suffix");
  metal_names.erase("strata_get_rows_suffix");
  metal_names.erase("strata_moe_gemv_suffix");
  std::set<std::string> emu_names;
  for (const char* n : strata::emu::kernel_names()) emu_names.insert(n);
  CHECK(files >= 4);
  for (const auto& n : metal_names) CHECK_MSG(emu_names.count(n) == 1, "no emulator entry for " + n);
  for (const auto& n : emu_names) CHECK_MSG(metal_names.count(n) == 1, "no .metal entry for " + n);
  CHECK(emu_names.size() > 20);
}

TEST(bodies_never_declare_threadgroup_memory) {
  const std::filesystem::path dir = std::filesystem::path(STRATA_METAL_SOURCE_DIR) / "kernels";
  int headers = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".h") continue;
    const std::string name = e.path().filename().string();
    if (name == "msl_compat.h" || name == "msl_compat_end.h") continue;  // the shim defines the word
    ++headers;
    const std::string src = strip_comments(read(e.path()));
    // `threadgroup T ...` (a declaration), not threadgroup_barrier / [[threadgroup_position_in_grid]].
    CHECK_MSG(names_after(src, "threadgroup", "").empty(), name + " declares threadgroup memory");
  }
  CHECK(headers >= 8);
}
