// AMX tiles (cpu/amx, cpu/features.h). Everywhere: the detection says why AMX is or is not usable,
// the probe's child process turns a faulting, wrong or hanging probe into "no" and leaves the caller's
// SIGILL handler alone, a failed probe leaves the kernel table on the AVX-512 kernels, and STRATA_ISA=avx512+amx parses
// as documented. Where AMX is usable (an Intel Xeon of Sapphire Rapids or later): the tile kernels of Q8_0_R16 /
// Q4_0_R16 are bitwise the plain scalar kernels for 1..64 (and 100) activations, equally spaced or not, row counts that
// are not a multiple of 16 and several block counts; elsewhere that case prints "skipped: no AMX" with the reason.
#define STRATA_TEST_MAIN
#include "check.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "strata/config/settings.h"
#include "strata/cpu/amx/dot_amx.h"
#include "strata/cpu/features.h"
#include "strata/cpu/kernels.h"
#include "strata/cpu/repack/repack.h"
#include "strata/util/error.h"
#include "test_quant_util.h"

namespace {

using namespace quant_test;
using strata::cpu::Isa;
namespace cpu = strata::cpu;

bool probe_traps() {
  __builtin_trap();  // ud2 on x86-64: SIGILL, what a CPU without usable tiles raises
}
bool probe_wrong() { return false; }
bool probe_right() { return true; }
bool probe_hangs() {
  for (;;) pause();
}
// True only in the process that called the probe first: a probe that runs in a child sees another pid.
pid_t g_test_pid = 0;
bool probe_in_another_process() { return getpid() != g_test_pid; }

extern "C" void marker_handler(int) {}

// Restores the detected status and the AMX switch at scope exit.
struct AmxGuard {
  cpu::AmxStatus saved = cpu::amx_status();
  bool enabled = cpu::amx_enabled();
  ~AmxGuard() {
    cpu::set_amx_status_for_testing(saved);
    if (saved.usable) cpu::force_amx(enabled);
  }
};

}  // namespace

TEST(amx_detection_reports_why) {
  const cpu::AmxStatus& s = cpu::amx_status();
  std::printf("AMX: %s (path %s)\n", s.detail.c_str(), cpu::active_path_name());
  CHECK(!s.detail.empty());
  CHECK(s.usable == (s.detail == "usable"));
  if (s.usable) CHECK(cpu::isa_supported(Isa::Avx512));
  if (!s.usable) {
    CHECK(!cpu::amx_enabled());
    CHECK_THROWS(cpu::force_amx(true));
    cpu::force_amx(false);  // turning it off is always allowed
  }
}

TEST(probe_child_turns_faults_wrong_results_and_hangs_into_no) {
#if defined(__x86_64__)
  struct sigaction mine{}, before{}, after{};
  mine.sa_handler = marker_handler;
  sigemptyset(&mine.sa_mask);
  CHECK(sigaction(SIGILL, &mine, &before) == 0);
  std::string why;
  CHECK(!cpu::run_probe_in_child(probe_traps, why));
  CHECK_MSG(why == "raised SIGILL", why);
  CHECK(!cpu::run_probe_in_child(probe_wrong, why));
  CHECK_MSG(why == "computed a wrong result", why);
  CHECK(!cpu::run_probe_in_child(probe_hangs, why, 50));
  CHECK_MSG(why == "did not finish in 50 ms", why);
  why.clear();
  CHECK(cpu::run_probe_in_child(probe_right, why));
  CHECK(why.empty());
  g_test_pid = getpid();
  CHECK(cpu::run_probe_in_child(probe_in_another_process, why));
  CHECK(sigaction(SIGILL, &before, &after) == 0);
  CHECK(after.sa_handler == marker_handler);  // the caller's handler was never touched
#endif
}

// A probe that faults (as on a VM that advertises AMX it cannot run): detection says no and the
// kernel table keeps the AVX-512 kernels. Here without AMX the CPUID step already says no; on an
// AMX machine this runs the whole chain up to the faulting probe.
TEST(failed_probe_falls_back_to_avx512) {
  AmxGuard guard;
  const cpu::AmxStatus s = cpu::detect_amx(probe_traps);
  std::printf("detection with a faulting probe: %s\n", s.detail.c_str());
  CHECK(!s.usable);
  if (cpu::amx_status().usable) CHECK_MSG(s.detail.find("SIGILL") != std::string::npos, s.detail);
  CHECK(!cpu::detect_amx(probe_wrong).usable);
  cpu::set_amx_status_for_testing(s);
  CHECK(!cpu::amx_enabled());
  CHECK_THROWS(cpu::force_amx(true));
  if (cpu::isa_supported(Isa::Avx512)) {
    for (GGMLType t : {GGMLType::Q8_0_R16, GGMLType::Q4_0_R16})
      CHECK(cpu::dot_kernel(t, Isa::Avx512).dot_rows_multi == cpu::avx512::kernel(t)->dot_rows_multi);
    const IsaGuard isa_guard;
    cpu::force_isa(Isa::Avx512);
    CHECK(std::string(cpu::active_path_name()) == "avx512");
  }
}

TEST(amx_switch_and_setting) {
  AmxGuard guard;
  const strata::config::ParseResult p = strata::config::parse_settings({{"STRATA_ISA", "avx512+amx"}});
  const strata::config::ParseResult q = strata::config::parse_settings({{"STRATA_ISA", "avx512"}});
  if (cpu::amx_status().usable) {
    CHECK(p.diagnostics.empty() && p.settings.cpu.isa == Isa::Avx512 && p.settings.cpu.amx);
    CHECK(q.diagnostics.empty() && q.settings.cpu.isa == Isa::Avx512 && !q.settings.cpu.amx);
    const IsaGuard isa_guard;
    cpu::force_isa(Isa::Avx512);
    cpu::force_amx(true);
    CHECK(std::string(cpu::active_path_name()) == cpu::kAmxPathName);
    CHECK(cpu::dot_kernel(GGMLType::Q8_0_R16, Isa::Avx512).dot_rows_multi !=
          cpu::avx512::kernel(GGMLType::Q8_0_R16)->dot_rows_multi);
    cpu::force_amx(false);
    CHECK(std::string(cpu::active_path_name()) == "avx512");
    CHECK(cpu::dot_kernel(GGMLType::Q8_0_R16, Isa::Avx512).dot_rows_multi ==
          cpu::avx512::kernel(GGMLType::Q8_0_R16)->dot_rows_multi);
  } else {
    CHECK(p.diagnostics.size() == 1 && !p.settings.cpu.isa && !p.settings.cpu.amx);
    CHECK_MSG(p.diagnostics[0].find(cpu::amx_status().detail) != std::string::npos, p.diagnostics[0]);
  }
}

// Every (row, activation) of the tile kernels (and of the table's thresholded ones) equals the
// plain scalar kernel bitwise; rows past nrows are left alone.
TEST(amx_kernels_equal_the_plain_scalar_kernel_bitwise) {
  if (!cpu::amx_status().usable) {
    std::printf("skipped: no AMX (%s)\n", cpu::amx_status().detail.c_str());
    return;
  }
  std::mt19937 rng(12);
  struct Case {
    GGMLType plain;
    cpu::DotRowsMultiFn tiles;
  };
  const Case kCases[] = {{GGMLType::Q8_0, cpu::amx::dot_rows_multi_q8_0_r16_tiles},
                         {GGMLType::Q4_0, cpu::amx::dot_rows_multi_q4_0_r16_tiles}};
  constexpr int kMaxActs = 100;
  int compared = 0;
  for (const Case& c : kCases) {
    const GGMLType rt = cpu::repacked_type(c.plain);
    const cpu::DotKernel& table = cpu::amx::kernel(rt) ? *cpu::amx::kernel(rt) : cpu::dot_kernel(rt, Isa::Avx512);
    for (int64_t cols : {32, 64, 96, 256, 1056}) {
      const int64_t rows = 48;
      const auto w = random_rows(c.plain, rows, cols, rng);
      std::vector<uint8_t> wr(w.size());
      cpu::repack_rows(c.plain, w.data(), rows, cols, wr.data());
      const std::size_t stride = strata::quant::row_bytes(c.plain, cols);
      const cpu::DotKernel& ref = cpu::dot_kernel(c.plain, Isa::Scalar);
      const std::size_t ab = cpu::activation_row_bytes(c.plain, cols);
      const auto X = random_floats(kMaxActs * cols, rng);
      std::vector<uint8_t> act(kMaxActs * ab);
      for (int i = 0; i < kMaxActs; ++i) ref.quantize_act(X.data() + i * cols, act.data() + i * ab, cols);
      std::vector<float> want(static_cast<std::size_t>(kMaxActs * rows));
      for (int i = 0; i < kMaxActs; ++i)
        ref.dot_rows(cols, w.data(), stride, rows, act.data() + i * ab, want.data() + i * rows);
      std::vector<int> order(kMaxActs);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<int> nacts(64);
      std::iota(nacts.begin(), nacts.end(), 1);
      nacts.push_back(kMaxActs);
      for (int64_t nrows : {48, 16, 20, 5}) {
        for (int na : nacts) {
          for (int shuffled = 0; shuffled < 2; ++shuffled) {
            const void* acts[kMaxActs];
            float* outs[kMaxActs];
            std::vector<float> got(static_cast<std::size_t>(na * rows), -1.0f);
            for (int a = 0; a < na; ++a) {
              acts[a] = act.data() + static_cast<std::size_t>(shuffled ? order[a] : a) * ab;
              outs[a] = got.data() + a * rows;
            }
            for (int pass = 0; pass < 2; ++pass) {
              (pass == 0 ? c.tiles : table.dot_rows_multi)(cols, wr.data(), stride, nrows, acts, na, outs);
              for (int a = 0; a < na; ++a) {
                const float* wa = want.data() + (shuffled ? order[a] : a) * rows;
                const std::string what = std::string(strata::quant::type_name(rt)) + (pass ? " table" : " tiles") +
                                         " cols " + std::to_string(cols) + " nrows " + std::to_string(nrows) +
                                         " nact " + std::to_string(na) + (shuffled ? " shuffled" : "");
                CHECK_MSG(std::memcmp(outs[a], wa, static_cast<std::size_t>(nrows) * 4) == 0, what);
                CHECK_MSG(std::all_of(outs[a] + nrows, outs[a] + rows, [](float v) { return v == -1.0f; }),
                          what + " wrote past nrows");
                ++compared;
              }
            }
          }
        }
      }
    }
  }
  std::printf("AMX tile kernels: %d (kernel, shape, activation) results bitwise the scalar kernel\n", compared);
}
