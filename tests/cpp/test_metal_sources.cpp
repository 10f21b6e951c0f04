// One source, two targets (R-7), checked on the sources themselves:
//   - the .metal entry points and the emulator's entry table name the same kernels;
//   - kernel bodies (metal/kernels/*.h) never declare threadgroup memory: it is passed in as TGP(T);
//   - every body header compiles in C++ on its own (this file includes them all).
#define STRATA_TEST_MAIN
#include "check.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

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

}  // namespace

TEST(metal_entry_points_match_the_emulator_table) {
  const std::filesystem::path dir = std::filesystem::path(STRATA_METAL_SOURCE_DIR) / "kernels";
  std::set<std::string> metal_names;
  const std::regex plain(R"(kernel\s+void\s+(strata_\w+)\s*\()");
  const std::regex gemv(R"(STRATA_GEMV_ENTRIES\((\w+),)");
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".metal") continue;
    ++files;
    const std::string src = strip_comments(read(e.path()));
    for (std::sregex_iterator it(src.begin(), src.end(), plain), end; it != end; ++it) metal_names.insert((*it)[1]);
    for (std::sregex_iterator it(src.begin(), src.end(), gemv), end; it != end; ++it) {
      metal_names.insert("strata_gemv_" + (*it)[1].str());
      metal_names.insert("strata_get_rows_" + (*it)[1].str());
      metal_names.insert("strata_moe_gemv_" + (*it)[1].str());
    }
  }
  metal_names.erase("strata_gemv_suffix");  // the macro's own definition line
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
  const std::regex decl(R"(\bthreadgroup\s+[A-Za-z_])");  // `threadgroup T ...`, not threadgroup_barrier
  int headers = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".h") continue;
    const std::string name = e.path().filename().string();
    if (name == "msl_compat.h" || name == "msl_compat_end.h") continue;  // the shim defines the word
    ++headers;
    const std::string src = strip_comments(read(e.path()));
    CHECK_MSG(!std::regex_search(src, decl), name + " declares threadgroup memory");
  }
  CHECK(headers >= 8);
}
