#pragma once
// The threadgroup / SIMD-group emulator (SPEC §3, R-7). A kernel is a C++ callable run once per
// emulated GPU thread; the emulator runs every thread of a threadgroup as a cooperative fiber, so:
//   - threadgroup_barrier is a real barrier: no thread continues until every thread of the group
//     has arrived; a thread that returns while others wait at a barrier is reported;
//   - SIMD-group collectives (simd_sum, simd_max, simd_shuffle*, ...) exchange values between the 32
//     lanes of a SIMD group (thread index / 32) at the point every active lane has reached them, with
//     a fixed reduction tree (an xor butterfly: offsets 16, 8, 4, 2, 1), so the bits never depend on
//     the order in which the emulator happened to run the lanes;
//   - threadgroup memory is reached only through tg_ptr<T>, which checks bounds and records, per
//     byte, who wrote and read it since the last barrier: a write by one thread and a read or write
//     by another in the same barrier interval is a race; a read of bytes nobody wrote in this
//     threadgroup is an uninitialised read. Fresh threadgroup memory is filled with a NaN pattern.
// Threadgroups run independently (optionally on a thread pool); inside a group the fibers run in
// thread-index order (or reversed: Options::reverse_order), which makes a missing barrier show up
// as a wrong answer as well as a reported race.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace strata {
class ThreadPool;
}

namespace strata::emu {

inline constexpr uint32_t kSimdWidth = 32;
inline constexpr uint32_t kMaxThreadsPerGroup = 1024;
inline constexpr uint32_t kMaxThreadgroupMemory = 32768;  // bytes, as on Apple GPUs
inline constexpr int kMaxThreadgroupArgs = 4;

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
};

// The positions MSL passes as [[attributes]].
struct ThreadPos {
  Dim3 tg_pos;               // threadgroup_position_in_grid
  Dim3 tid;                  // thread_position_in_threadgroup
  Dim3 tg_size;              // threads_per_threadgroup
  Dim3 grid_tgs;             // threadgroups_per_grid
  uint32_t index = 0;        // thread_index_in_threadgroup
  uint32_t simd_group = 0;   // simdgroup_index_in_threadgroup
  uint32_t simd_lane = 0;    // thread_index_in_simdgroup
  uint32_t simd_groups = 0;  // simdgroups_per_threadgroup
};

enum class ViolationKind {
  Race,                // conflicting threadgroup-memory accesses in one barrier interval
  UninitialisedRead,   // threadgroup memory read before anyone in the group wrote it
  OutOfBounds,         // threadgroup access outside its [[threadgroup(i)]] region
  BarrierDivergence,   // not every thread reached a threadgroup barrier
  SimdDivergence,      // lanes of one SIMD group in different collectives, or one missing
  NonUniformArgument,  // a collective's lane/delta/mask argument differs between lanes
  InactiveLane,        // a shuffle read a lane that has returned
};
const char* violation_name(ViolationKind k);

struct Violation {
  ViolationKind kind;
  std::string message;
};

struct Options {
  bool detect_races = true;
  bool reverse_order = false;      // run the fibers of a group in decreasing thread index
  bool throw_on_violation = true;  // dispatch throws strata::Error(Internal) after a violation
  std::size_t stack_bytes = 256 * 1024;
  ThreadPool* pool = nullptr;  // threadgroups in parallel (nullptr: the calling thread only)
  int max_recorded = 32;       // violations kept (all are counted)
};

using KernelFn = void (*)(const void* ctx, const ThreadPos& pos);

struct Launch {
  KernelFn fn = nullptr;
  const void* ctx = nullptr;
  Dim3 grid;                                              // threadgroups per grid
  Dim3 group;                                             // threads per threadgroup
  uint32_t tg_bytes[kMaxThreadgroupArgs] = {0, 0, 0, 0};  // [[threadgroup(i)]] lengths
  const char* name = "kernel";
};

class Emulator {
 public:
  explicit Emulator(Options opt = {});
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  Options& options() { return opt_; }

  // Runs every thread of every threadgroup. Throws strata::Error(Value) on a bad launch shape and,
  // when throw_on_violation, strata::Error(Internal) naming the first violation. A fatal violation
  // (divergence) abandons the rest of its threadgroup.
  void dispatch(const Launch& l);

  // Violations since the last clear (the first max_recorded of them) and their total count.
  const std::vector<Violation>& violations() const { return violations_; }
  uint64_t violation_count() const { return n_violations_; }
  void clear_violations();

  // Totals since construction (measurements).
  uint64_t threads_run() const { return threads_run_; }
  uint64_t switches() const { return switches_; }

  // Used by the group runners.
  void record(ViolationKind k, const std::string& msg);

 private:
  Options opt_;
  std::mutex mu_;
  std::vector<Violation> violations_;
  uint64_t n_violations_ = 0;
  uint64_t threads_run_ = 0;
  uint64_t switches_ = 0;
};

// ---- What the kernel-side shims call (metal/kernels/msl_compat.h). Valid only inside a kernel
// running under Emulator::dispatch.

enum class SimdOp : uint8_t {
  Sum,
  Max,
  Min,
  Product,
  And,
  Or,
  Xor,
  PrefixExclusiveSum,
  PrefixInclusiveSum,
  Shuffle,
  ShuffleXor,
  ShuffleUp,
  ShuffleDown,
  Broadcast,
  BroadcastFirst,
  Any,
  All,
  Ballot,
};
enum class SimdType : uint8_t { F32, I32, U32 };

void threadgroup_barrier_impl();
void simdgroup_barrier_impl();
// Exchanges one 32-bit value (bits of a float, int or uint) with the other lanes of the caller's
// SIMD group; arg is the lane / mask / delta of shuffles (must be uniform where MSL requires it).
uint32_t simd_collective(SimdOp op, SimdType type, uint32_t bits, uint32_t arg);
uint64_t simd_ballot_impl(bool pred);

// ---- Threadgroup memory.

class TgArena {
 public:
  void on_read(uint32_t off, uint32_t n, uint32_t region_begin, uint32_t region_end);
  void on_write(uint32_t off, uint32_t n, uint32_t region_begin, uint32_t region_end);
  uint8_t* data() { return bytes_.data(); }

 private:
  friend class GroupRunner;
  struct Shadow {
    uint64_t w_stamp = 0;  // barrier interval of the last write (0: never written in this group)
    uint64_t r_stamp = 0;  // barrier interval of the last read
    int32_t w_thread = -1;
    int32_t r_thread = -1;  // -2: several readers in r_stamp's interval
  };
  void check(uint32_t off, uint32_t n, uint32_t begin, uint32_t end);
  std::vector<uint8_t> bytes_;
  std::vector<Shadow> shadow_;
  class GroupRunner* runner_ = nullptr;
};

// The arena of the group the calling fiber belongs to and the byte range of [[threadgroup(i)]].
TgArena* current_arena();
void threadgroup_region(int index, uint32_t& begin, uint32_t& end);

template <class T>
class tg_ref {
 public:
  tg_ref(TgArena* a, uint32_t off, uint32_t b, uint32_t e) : a_(a), off_(off), b_(b), e_(e) {}
  operator T() const {
    a_->on_read(off_, sizeof(T), b_, e_);
    T v;
    std::memcpy(&v, a_->data() + off_, sizeof(T));
    return v;
  }
  tg_ref& operator=(const T& v) {
    a_->on_write(off_, sizeof(T), b_, e_);
    std::memcpy(a_->data() + off_, &v, sizeof(T));
    return *this;
  }
  tg_ref& operator=(const tg_ref& o) { return *this = static_cast<T>(o); }
  tg_ref& operator+=(const T& v) { return *this = static_cast<T>(static_cast<T>(*this) + v); }
  tg_ref& operator-=(const T& v) { return *this = static_cast<T>(static_cast<T>(*this) - v); }
  tg_ref& operator*=(const T& v) { return *this = static_cast<T>(static_cast<T>(*this) * v); }
  tg_ref& operator/=(const T& v) { return *this = static_cast<T>(static_cast<T>(*this) / v); }
  tg_ref& operator|=(const T& v) { return *this = static_cast<T>(static_cast<T>(*this) | v); }
  tg_ref& operator&=(const T& v) { return *this = static_cast<T>(static_cast<T>(*this) & v); }

 private:
  TgArena* a_;
  uint32_t off_, b_, e_;
};

// A pointer into threadgroup memory: what `threadgroup T*` is in MSL (metal/kernels/msl_compat.h
// spells it TGP(T)). Offsets are bytes from the arena start; every access is checked and recorded.
template <class T>
class tg_ptr {
 public:
  tg_ptr() = default;
  tg_ptr(TgArena* a, uint32_t off, uint32_t b, uint32_t e) : a_(a), off_(off), b_(b), e_(e) {}
  tg_ref<T> operator[](int64_t i) const { return tg_ref<T>(a_, at(i), b_, e_); }
  tg_ref<T> operator*() const { return (*this)[0]; }
  tg_ptr operator+(int64_t i) const { return tg_ptr(a_, at(i), b_, e_); }
  tg_ptr operator-(int64_t i) const { return tg_ptr(a_, at(-i), b_, e_); }
  tg_ptr& operator+=(int64_t i) {
    off_ = at(i);
    return *this;
  }
  template <class U>
  tg_ptr<U> cast() const {
    return tg_ptr<U>(a_, off_, b_, e_);
  }

 private:
  uint32_t at(int64_t i) const {
    return static_cast<uint32_t>(static_cast<int64_t>(off_) + i * static_cast<int64_t>(sizeof(T)));
  }
  TgArena* a_ = nullptr;
  uint32_t off_ = 0, b_ = 0, e_ = 0;
};

// tg_ptr<T> to the start of [[threadgroup(index)]] of the running group.
template <class T>
tg_ptr<T> threadgroup_arg(int index) {
  uint32_t b = 0, e = 0;
  threadgroup_region(index, b, e);
  return tg_ptr<T>(current_arena(), b, b, e);
}

}  // namespace strata::emu
