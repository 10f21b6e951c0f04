// Unit tests of the util layer: thread pool, aligned buffers, fp16/bf16 conversions, errors.
#define STRATA_TEST_MAIN
#include "check.h"

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strata/util/aligned.h"
#include "strata/util/error.h"
#include "strata/util/fp16.h"
#include "strata/util/thread_pool.h"

TEST(thread_pool_covers_every_index_once) {
  strata::ThreadPool pool(4);
  for (int64_t n : {1, 7, 64, 1000, 4097}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) CHECK_EQ(h.load(), 1);
  }
}

// Each thread owns a contiguous share [n·t/T, n·(t+1)/T) (the caller is thread 0) and claims it front
// to back, a quarter of what is left at a time (never under the grain); a thread done with its share
// takes chunks from the back of the others'. So no chunk crosses a share, the caller's own chunks of
// share 0 follow one another from 0 upwards (one memory stream), and the other chunks of share 0 were
// taken from its back: sorted from the top they join up, down to where the caller's chunks end.
TEST(thread_pool_threads_claim_their_own_share_front_to_back) {
  for (int threads : {2, 3}) {
    strata::ThreadPool pool(threads);
    for (int64_t grain : {1, 5}) {
      const int64_t n = 1000;
      struct Chunk {
        int64_t b, e;
        bool caller;
      };
      std::mutex m;
      std::vector<Chunk> got;  // in the order the chunks ran (the caller's: the order it claimed them)
      const auto caller = std::this_thread::get_id();
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> lock(m);
        got.push_back(Chunk{b, e, std::this_thread::get_id() == caller});
      });
      int64_t front = 0, covered = 0;
      std::vector<std::pair<int64_t, int64_t>> from_back;
      std::vector<int> small(static_cast<std::size_t>(threads), 0);
      for (const Chunk& c : got) {
        CHECK(c.b < c.e);
        int64_t share = 0;  // the share holding the chunk's first item
        while (c.b >= n * (share + 1) / threads) ++share;
        CHECK(c.e <= n * (share + 1) / threads);  // never past that share's end
        // Under the grain only when it took the share's last items: once per share at most.
        if (c.e - c.b < grain) CHECK(++small[static_cast<std::size_t>(share)] == 1);
        covered += c.e - c.b;
        if (share != 0) continue;
        if (c.caller && c.b == front)
          front = c.e;  // the owner's next chunk, front to back
        else
          from_back.emplace_back(c.b, c.e);
      }
      std::sort(from_back.begin(), from_back.end(), std::greater<>());
      int64_t back = n / threads;
      for (const auto& [b, e] : from_back) {
        CHECK_EQ(e, back);
        back = b;
      }
      CHECK_EQ(front, back);  // share 0 covered from both ends, no gap
      CHECK_EQ(covered, n);
    }
  }
}

// A job of a few grains goes to as many threads as it has grains: each owns a share of at least a
// grain, and a thread without a share only takes chunks of at least a grain from the others' backs.
TEST(thread_pool_small_jobs_keep_chunks_of_a_grain) {
  strata::ThreadPool pool(4);
  for (int64_t n : {10, 15, 25, 40}) {
    std::mutex m;
    std::vector<std::pair<int64_t, int64_t>> got;
    pool.parallel_for(n, 10, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(m);
      got.emplace_back(b, e);
    });
    std::sort(got.begin(), got.end());
    int64_t at = 0, small = 0;
    for (const auto& [b, e] : got) {
      CHECK_EQ(b, at);
      small += e - b < 10 ? 1 : 0;
      at = e;
    }
    CHECK_EQ(at, n);
    CHECK(static_cast<int64_t>(got.size()) <= std::max<int64_t>(1, n / 10) + small);
    CHECK(small <= std::max<int64_t>(1, n / 10));  // a share's last piece at most
  }
}

// A thread held up in its first chunk leaves the rest of its share to the others, taken from its
// back: the caller's one chunk is a quarter of its share at most (a counter's claims gave it a
// 2·threads-th of the whole job: half its share), and the worker ran every other item.
TEST(thread_pool_takes_a_slow_threads_share_from_the_back) {
  strata::ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> by_caller;
  std::atomic<int64_t> by_worker{0};
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() == caller) {
      std::lock_guard<std::mutex> lock(m);
      by_caller.emplace_back(b, e);
      if (by_caller.size() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    } else {
      by_worker += e - b;
    }
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (auto& h : hits) CHECK_EQ(h.load(), 1);
  CHECK_EQ(by_caller.size(), std::size_t{1});
  const int64_t first = by_caller[0].second - by_caller[0].first;  // [0, 125) unless the worker was quicker
  CHECK(first <= 125);
  CHECK_EQ(by_worker.load(), 1000 - first);
}

TEST(thread_pool_rethrows_and_stays_usable) {
  strata::ThreadPool pool(3);
  CHECK_THROWS(pool.parallel_for(100, 1, [](int64_t b, int64_t) {
    if (b >= 50) strata::throw_error(strata::ErrorKind::Internal, "boom");
  }));
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK_EQ(sum.load(), int64_t{4950});
}

TEST(default_pool_follows_set_default_threads) {
  using strata::ThreadPool;
  ThreadPool::set_default_threads(3);
  ThreadPool& three = ThreadPool::global();
  CHECK_EQ(three.size(), 3);
  ThreadPool::set_default_threads(0);  // back to one per core, even after a custom size
  CHECK_EQ(ThreadPool::global().size(), ThreadPool::default_threads());
  // The replaced pool stays usable: an engine made before the change still holds it.
  std::atomic<int64_t> sum{0};
  three.parallel_for(100, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK_EQ(sum.load(), int64_t{4950});
}

TEST(default_threads_counts_physical_cores) {
  const int n = strata::ThreadPool::default_threads();
  CHECK(n >= 1);
  CHECK(n <= static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(thread_pool_counts_dispatches_not_inline_runs) {
  strata::ThreadPool pool(2);
  const uint64_t before = pool.dispatches();
  pool.parallel_for(4, 8, [](int64_t, int64_t) {});  // n <= grain: inline
  CHECK_EQ(pool.dispatches(), before);
  for (int i = 0; i < 10; ++i) pool.parallel_for(64, 1, [](int64_t, int64_t) {});
  CHECK_EQ(pool.dispatches(), before + 10);
}

TEST(spinning_workers_do_not_sleep_between_close_dispatches) {
  // A generous spin budget: back-to-back dispatches never reach a condition-variable sleep.
  strata::ThreadPool pool(2, 2'000'000);
  std::atomic<int64_t> sum{0};
  for (int it = 0; it < 500; ++it)
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  CHECK_EQ(sum.load(), int64_t{500} * 2016);
  CHECK_EQ(pool.sleeps(), uint64_t{0});
}

TEST(non_spinning_pool_sleeps_and_stays_correct) {
  strata::ThreadPool pool(3, 0);
  for (int it = 0; it < 200; ++it) {
    std::vector<std::atomic<int>> hits(97);
    pool.parallel_for(97, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
    for (auto& h : hits) CHECK_EQ(h.load(), 1);
  }
  CHECK(pool.sleeps() > 0);
}

TEST(thread_start_failure_is_an_error_not_a_hang) {
  using strata::ThreadPool;
  ThreadPool::fail_thread_start_for_test(3);
  std::string what;
  strata::ErrorKind kind = strata::ErrorKind::Internal;
  try {
    ThreadPool pool(6);
  } catch (const strata::Error& e) {
    what = e.what();
    kind = e.kind();
  }
  ThreadPool::fail_thread_start_for_test(-1);
  CHECK(kind == strata::ErrorKind::IO);
  CHECK(what.find("could not start worker thread 4 of 6") != std::string::npos);
  ThreadPool ok(6);  // the hook is off again
  CHECK_EQ(ok.size(), 6);
}

// ASan and TSan reserve terabytes of shadow address space: an RLIMIT_AS would break them first.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STRATA_TEST_SHADOW_MEMORY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STRATA_TEST_SHADOW_MEMORY 1
#endif
#endif
#if !defined(STRATA_TEST_SHADOW_MEMORY)
TEST(thread_start_failure_under_an_address_space_limit) {
  // The reported case: `ulimit -v` small and 1024 threads. In a child process (the limit must not
  // reach the test runner), with an alarm so a hang fails the test instead of stalling ctest.
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(60);
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = rlim_t{1} << 30;  // 1 GiB: far less than 1024 thread stacks
    if (setrlimit(RLIMIT_AS, &lim) != 0) _exit(3);
    try {
      strata::ThreadPool pool(1024);
    } catch (const strata::Error& e) {
      _exit(e.kind() == strata::ErrorKind::IO ? 0 : 4);
    } catch (...) {
      _exit(5);
    }
    _exit(6);  // every thread started: the limit did not bite
  }
  int status = 0;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  CHECK(WIFEXITED(status));  // not killed by the alarm (a hang) or a signal
  CHECK_EQ(WEXITSTATUS(status), 0);
}
#endif

TEST(aligned_buffer_is_aligned) {
  strata::AlignedBuffer<float> buf(1000);
  CHECK(reinterpret_cast<uintptr_t>(buf.data()) % 64 == 0);
  CHECK_EQ(buf.size(), size_t{1000});
  buf.resize(10);
  CHECK_EQ(buf.size(), size_t{10});
  CHECK(buf.capacity() >= 1000);
}

TEST(large_aligned_buffers_are_huge_page_aligned) {
  // kHugeMin bytes and up: 2 MiB aligned (and advised MADV_HUGEPAGE on Linux); smaller: 64.
  using B = strata::AlignedBuffer<uint8_t>;
  B big(B::kHugeMin);
  CHECK(reinterpret_cast<uintptr_t>(big.data()) % B::kHugeAlign == 0);
  std::memset(big.data(), 1, big.size());  // the whole rounded-up allocation is usable
  B small(B::kHugeMin - 1);
  CHECK(reinterpret_cast<uintptr_t>(small.data()) % 64 == 0);
  strata::AlignedBuffer<float> floats(B::kHugeMin / sizeof(float) + 1);
  CHECK(reinterpret_cast<uintptr_t>(floats.data()) % B::kHugeAlign == 0);
}

#if defined(__linux__)
namespace {
// The VmFlags line of the mapping that holds p (/proc/self/smaps), "" when not found.
std::string vm_flags_of(const void* p) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (!f) return "";
  const auto a = reinterpret_cast<uintptr_t>(p);
  char line[512];
  bool inside = false;
  std::string out;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && std::strncmp(line, "VmFlags:", 8) == 0) {
      out = line;
      break;
    }
  }
  std::fclose(f);
  return out;
}
}  // namespace

TEST(scratch_buffers_never_ask_for_huge_pages) {
  // Large AlignedBuffers are advised MADV_HUGEPAGE (VmFlags "hg"); a ScratchBuffer of the same size is
  // not: a decode step touches a row of it, and faulting in a huge page zeroes (and may compact) 2 MiB.
  strata::AlignedBuffer<float> big(strata::AlignedBuffer<float>::kHugeMin);
  strata::ScratchBuffer<float> scratch(strata::AlignedBuffer<float>::kHugeMin);
  big[0] = scratch[0] = 1.0f;
  const std::string fb = vm_flags_of(big.data()), fs = vm_flags_of(scratch.data());
  CHECK_MSG(!fb.empty() && !fs.empty(), "no VmFlags in /proc/self/smaps");
  CHECK_MSG(fb.find(" hg") != std::string::npos, fb);
  CHECK_MSG(fs.find(" hg") == std::string::npos, fs);
  CHECK(reinterpret_cast<uintptr_t>(scratch.data()) % 64 == 0);
}
#endif

TEST(fp16_round_trip_every_half) {
  // Every finite half converts to float and back unchanged.
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    if ((x & 0x7c00) == 0x7c00) continue;  // inf/nan
    if (strata::fp32_to_fp16(strata::fp16_to_fp32(x)) != x) ++bad;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(strata::fp16_to_fp32(0x3c00), 1.0f);
  CHECK_EQ(strata::fp32_to_fp16(65504.0f), uint16_t{0x7bff});
}

TEST(bf16_rounds_to_nearest_even) {
  CHECK_EQ(strata::fp32_to_bf16(1.0f), uint16_t{0x3f80});
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (down).
  CHECK_EQ(strata::fp32_to_bf16(1.00390625f), uint16_t{0x3f80});
  CHECK_EQ(strata::bf16_to_fp32(0x4000), 2.0f);
}

TEST(error_carries_kind_and_message) {
  try {
    strata::throw_file_error(strata::ErrorKind::Format, "model.gguf", "bad magic");
  } catch (const strata::Error& e) {
    CHECK(e.kind() == strata::ErrorKind::Format);
    CHECK(std::strcmp(e.what(), "model.gguf: bad magic") == 0);
  }
}
