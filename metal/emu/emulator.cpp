#include "metal/emu/emulator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <memory>

#include "metal/emu/fiber.h"
#include "strata/util/error.h"
#include "strata/util/thread_pool.h"

namespace strata::emu {

const char* violation_name(ViolationKind k) {
  switch (k) {
    case ViolationKind::Race: return "race";
    case ViolationKind::UninitialisedRead: return "uninitialised threadgroup read";
    case ViolationKind::OutOfBounds: return "threadgroup access out of bounds";
    case ViolationKind::BarrierDivergence: return "barrier divergence";
    case ViolationKind::SimdDivergence: return "SIMD-group divergence";
    case ViolationKind::NonUniformArgument: return "non-uniform collective argument";
    case ViolationKind::InactiveLane: return "read of an inactive lane";
  }
  return "?";
}

// One threadgroup at a time: the fibers of its threads, its threadgroup memory and the state of
// its barriers and collectives. Each OS thread that runs threadgroups owns one (thread_local).
class GroupRunner {
 public:
  enum class State : uint8_t { Runnable, AtBarrier, AtCollective, Done };
  static constexpr uint8_t kSimdBarrierOp = 0xFF;  // simdgroup_barrier rides on the collective path

  struct Fiber {
    FiberContext ctx;
    FiberStack stack;
    GroupRunner* runner = nullptr;
    ThreadPos pos;
    State state = State::Done;
    uint8_t op = 0;
    SimdType type = SimdType::F32;
    uint32_t bits = 0, arg = 0, result = 0;
    uint64_t result64 = 0;
  };

  GroupRunner() = default;
  ~GroupRunner() {
    for (auto& f : fibers_) fiber_destroy(f->ctx);
    fiber_destroy(sched_);
  }

  void run(Emulator& emu, const Options& opt, const Launch& l, const uint32_t* region_begin, const uint32_t* region_end,
           uint32_t tg_total, uint64_t group_linear);

  // Intrinsics.
  void barrier();
  uint32_t collective(uint8_t op, SimdType type, uint32_t bits, uint32_t arg, uint64_t* out64);
  Fiber& current() { return *fibers_[current_]; }
  uint32_t region_begin(int i) const { return region_begin_[i]; }
  uint32_t region_end(int i) const { return region_end_[i]; }
  TgArena& arena() { return arena_; }

  // Threadgroup-memory bookkeeping.
  uint64_t stamp_of(uint32_t thread) const { return (tg_epoch_ << 32) | sg_epoch_[thread / kSimdWidth]; }
  bool ordered(uint64_t a_stamp, int32_t a_thread, uint64_t b_stamp, uint32_t b_thread) const {
    if ((a_stamp >> 32) != (b_stamp >> 32)) return true;  // a threadgroup barrier in between
    return static_cast<uint32_t>(a_thread) / kSimdWidth == b_thread / kSimdWidth &&
           (a_stamp & 0xFFFFFFFFu) != (b_stamp & 0xFFFFFFFFu);  // a simdgroup barrier in between
  }
  void report(ViolationKind k, const std::string& what);
  // Records a fatal violation and leaves the calling fiber for good (its group is abandoned). The
  // message is a plain char buffer: nothing on the abandoned stack may own heap memory.
  [[noreturn]] void fatal(ViolationKind k, const char* what) { abort_group(current(), k, what); }
  bool detect_races() const { return opt_->detect_races; }

  uint64_t switches = 0;
  uint64_t threads = 0;

 private:
  static void entry(void* arg);
  void finish(Fiber& f);
  void yield(Fiber& f);
  [[noreturn]] void abort_group(Fiber& f, ViolationKind k, const char* what);
  void resolve(uint32_t sg);
  bool sg_ready(uint32_t sg) const;
  std::string where() const;

  Emulator* emu_ = nullptr;
  const Options* opt_ = nullptr;
  const Launch* launch_ = nullptr;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::size_t stack_bytes_ = 0;
  FiberContext sched_;
  TgArena arena_;
  uint32_t region_begin_[kMaxThreadgroupArgs] = {};
  uint32_t region_end_[kMaxThreadgroupArgs] = {};
  uint32_t n_ = 0;
  uint32_t current_ = 0;
  uint32_t finished_ = 0;
  uint32_t at_barrier_ = 0;
  uint64_t tg_epoch_ = 1;
  uint32_t sg_epoch_[kMaxThreadsPerGroup / kSimdWidth] = {};
  bool aborted_ = false;
  Dim3 tg_pos_;
};

namespace {

thread_local GroupRunner* t_runner = nullptr;

GroupRunner& runner() {
  if (t_runner == nullptr)
    throw_error(ErrorKind::Internal, "emulator intrinsic called outside a kernel run by Emulator::dispatch");
  return *t_runner;
}

GroupRunner& local_runner() {
  thread_local std::unique_ptr<GroupRunner> r;
  if (!r) r = std::make_unique<GroupRunner>();
  return *r;
}

inline float f32(uint32_t b) { return std::bit_cast<float>(b); }
inline uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// a (op) b for the reductions; identities make absent lanes neutral.
uint32_t combine(SimdOp op, SimdType t, uint32_t a, uint32_t b) {
  switch (op) {
    case SimdOp::Sum:
      if (t == SimdType::F32) return bits(f32(a) + f32(b));
      return a + b;  // two's complement: the same bits for int and uint
    case SimdOp::Product:
      if (t == SimdType::F32) return bits(f32(a) * f32(b));
      return a * b;
    case SimdOp::Max:
      if (t == SimdType::F32) return bits(std::fmax(f32(a), f32(b)));
      if (t == SimdType::I32) return static_cast<uint32_t>(std::max(static_cast<int32_t>(a), static_cast<int32_t>(b)));
      return std::max(a, b);
    case SimdOp::Min:
      if (t == SimdType::F32) return bits(std::fmin(f32(a), f32(b)));
      if (t == SimdType::I32) return static_cast<uint32_t>(std::min(static_cast<int32_t>(a), static_cast<int32_t>(b)));
      return std::min(a, b);
    case SimdOp::And: return a & b;
    case SimdOp::Or: return a | b;
    case SimdOp::Xor: return a ^ b;
    default: return 0;
  }
}

uint32_t identity(SimdOp op, SimdType t) {
  switch (op) {
    case SimdOp::Sum: return t == SimdType::F32 ? bits(-0.0f) : 0u;
    case SimdOp::Product: return t == SimdType::F32 ? bits(1.0f) : 1u;
    case SimdOp::Max:
      if (t == SimdType::F32) return bits(-INFINITY);
      return t == SimdType::I32 ? 0x80000000u : 0u;
    case SimdOp::Min:
      if (t == SimdType::F32) return bits(INFINITY);
      return t == SimdType::I32 ? 0x7FFFFFFFu : 0xFFFFFFFFu;
    case SimdOp::And: return 0xFFFFFFFFu;
    default: return 0u;
  }
}

const char* op_name(uint8_t op) {
  static const char* names[] = {"simd_sum",
                                "simd_max",
                                "simd_min",
                                "simd_product",
                                "simd_and",
                                "simd_or",
                                "simd_xor",
                                "simd_prefix_exclusive_sum",
                                "simd_prefix_inclusive_sum",
                                "simd_shuffle",
                                "simd_shuffle_xor",
                                "simd_shuffle_up",
                                "simd_shuffle_down",
                                "simd_broadcast",
                                "simd_broadcast_first",
                                "simd_any",
                                "simd_all",
                                "simd_ballot"};
  if (op == GroupRunner::kSimdBarrierOp) return "simdgroup_barrier";
  return op < sizeof(names) / sizeof(names[0]) ? names[op] : "?";
}

}  // namespace

std::string GroupRunner::where() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s, threadgroup (%u,%u,%u)", launch_->name, tg_pos_.x, tg_pos_.y, tg_pos_.z);
  return buf;
}

void GroupRunner::report(ViolationKind k, const std::string& what) { emu_->record(k, where() + ": " + what); }

void GroupRunner::run(Emulator& emu, const Options& opt, const Launch& l, const uint32_t* rb, const uint32_t* re,
                      uint32_t tg_total, uint64_t g) {
  emu_ = &emu;
  opt_ = &opt;
  launch_ = &l;
  n_ = static_cast<uint32_t>(l.group.count());
  tg_pos_.x = static_cast<uint32_t>(g % l.grid.x);
  tg_pos_.y = static_cast<uint32_t>((g / l.grid.x) % l.grid.y);
  tg_pos_.z = static_cast<uint32_t>(g / (uint64_t{l.grid.x} * l.grid.y));
  for (int i = 0; i < kMaxThreadgroupArgs; ++i) {
    region_begin_[i] = rb[i];
    region_end_[i] = re[i];
  }
  // Fresh threadgroup memory holds garbage on a GPU: a NaN pattern here, and no writer on record.
  if (arena_.bytes_.size() < tg_total) {
    arena_.bytes_.resize(tg_total);
    arena_.shadow_.resize(tg_total);
  }
  if (tg_total > 0) std::memset(arena_.bytes_.data(), 0xFF, tg_total);
  std::fill(arena_.shadow_.begin(), arena_.shadow_.begin() + tg_total, TgArena::Shadow{});
  arena_.runner_ = this;

  if (stack_bytes_ != opt.stack_bytes) {
    for (auto& f : fibers_) fiber_destroy(f->ctx);
    fibers_.clear();
    stack_bytes_ = opt.stack_bytes;
  }
  while (fibers_.size() < n_) {
    auto f = std::make_unique<Fiber>();
    f->stack = FiberStack(stack_bytes_);
    f->runner = this;
    fibers_.push_back(std::move(f));
  }
  const uint32_t n_sg = (n_ + kSimdWidth - 1) / kSimdWidth;
  for (uint32_t i = 0; i < n_; ++i) {
    Fiber& f = *fibers_[i];
    f.state = State::Runnable;
    ThreadPos& p = f.pos;
    p.tg_pos = tg_pos_;
    p.tg_size = l.group;
    p.grid_tgs = l.grid;
    p.index = i;
    p.tid.x = i % l.group.x;
    p.tid.y = (i / l.group.x) % l.group.y;
    p.tid.z = i / (l.group.x * l.group.y);
    p.simd_group = i / kSimdWidth;
    p.simd_lane = i % kSimdWidth;
    p.simd_groups = n_sg;
    fiber_init(f.ctx, f.stack, &GroupRunner::entry, &f);
  }
  finished_ = 0;
  at_barrier_ = 0;
  tg_epoch_ = 1;
  std::fill(std::begin(sg_epoch_), std::end(sg_epoch_), 0u);
  aborted_ = false;

  GroupRunner* saved = t_runner;
  t_runner = this;
  while (finished_ < n_ && !aborted_) {
    bool ran = false;
    for (uint32_t k = 0; k < n_ && !aborted_; ++k) {
      const uint32_t i = opt.reverse_order ? n_ - 1 - k : k;
      Fiber& f = *fibers_[i];
      if (f.state != State::Runnable) continue;
      current_ = i;
      ++switches;
      fiber_switch(sched_, f.ctx);
      ran = true;
    }
    if (!ran && finished_ < n_ && !aborted_) {
      // Nobody can move: some threads wait at a barrier others will never reach.
      uint32_t in_coll = 0, done = 0;
      for (uint32_t i = 0; i < n_; ++i) {
        in_coll += fibers_[i]->state == State::AtCollective;
        done += fibers_[i]->state == State::Done;
      }
      report(ViolationKind::BarrierDivergence, std::to_string(at_barrier_) + " of " + std::to_string(n_) +
                                                   " threads wait at threadgroup_barrier while " +
                                                   std::to_string(in_coll) + " wait in a SIMD-group collective and " +
                                                   std::to_string(done) + " have returned");
      aborted_ = true;
    }
  }
  t_runner = saved;
  threads += n_;
}

void GroupRunner::entry(void* arg) {
  auto* f = static_cast<Fiber*>(arg);
  GroupRunner& r = *f->runner;
  r.launch_->fn(r.launch_->ctx, f->pos);
  r.finish(*f);
  fiber_switch_final(f->ctx, r.sched_);
}

void GroupRunner::yield(Fiber& f) { fiber_switch(f.ctx, sched_); }

void GroupRunner::abort_group(Fiber& f, ViolationKind k, const char* what) {
  report(k, what);
  aborted_ = true;
  fiber_switch_final(f.ctx, sched_);
}

void GroupRunner::finish(Fiber& f) {
  f.state = State::Done;
  ++finished_;
  if (at_barrier_ > 0) {
    report(ViolationKind::BarrierDivergence, "thread " + std::to_string(f.pos.index) + " returned while " +
                                                 std::to_string(at_barrier_) + " threads wait at threadgroup_barrier");
    aborted_ = true;
    return;
  }
  // A lane leaving may complete a collective its SIMD group is waiting in.
  const uint32_t sg = f.pos.simd_group;
  if (sg_ready(sg)) resolve(sg);
}

void GroupRunner::barrier() {
  Fiber& f = current();
  if (finished_ > 0) {
    char msg[128];
    std::snprintf(msg, sizeof msg, "thread %u reached threadgroup_barrier after %u threads of the group returned",
                  f.pos.index, finished_);
    abort_group(f, ViolationKind::BarrierDivergence, msg);
  }
  ++at_barrier_;
  if (at_barrier_ == n_) {
    at_barrier_ = 0;
    ++tg_epoch_;
    for (uint32_t i = 0; i < n_; ++i)
      if (fibers_[i]->state == State::AtBarrier) fibers_[i]->state = State::Runnable;
    return;  // the last arrival continues at once
  }
  f.state = State::AtBarrier;
  yield(f);
}

bool GroupRunner::sg_ready(uint32_t sg) const {
  const uint32_t b = sg * kSimdWidth, e = std::min(n_, b + kSimdWidth);
  bool any = false;
  for (uint32_t i = b; i < e; ++i) {
    const State s = fibers_[i]->state;
    if (s == State::Done) continue;
    if (s != State::AtCollective) return false;
    any = true;
  }
  return any;
}

uint32_t GroupRunner::collective(uint8_t op, SimdType type, uint32_t v, uint32_t arg, uint64_t* out64) {
  Fiber& f = current();
  f.op = op;
  f.type = type;
  f.bits = v;
  f.arg = arg;
  f.state = State::AtCollective;
  const uint32_t sg = f.pos.simd_group;
  if (sg_ready(sg)) {
    resolve(sg);
    if (aborted_) fiber_switch_final(f.ctx, sched_);
  } else {
    yield(f);
  }
  if (out64) *out64 = f.result64;
  return f.result;
}

void GroupRunner::resolve(uint32_t sg) {
  const uint32_t b = sg * kSimdWidth, e = std::min(n_, b + kSimdWidth);
  Fiber* lane[kSimdWidth] = {};
  uint32_t first = kSimdWidth;
  for (uint32_t i = b; i < e; ++i)
    if (fibers_[i]->state == State::AtCollective) {
      lane[i - b] = fibers_[i].get();
      if (first == kSimdWidth) first = i - b;
    }
  Fiber& lead = *lane[first];
  for (uint32_t l = 0; l < kSimdWidth; ++l) {
    if (!lane[l]) continue;
    if (lane[l]->op != lead.op || lane[l]->type != lead.type) {
      report(ViolationKind::SimdDivergence, "SIMD group " + std::to_string(sg) + ": lane " + std::to_string(first) +
                                                " is in " + op_name(lead.op) + ", lane " + std::to_string(l) + " in " +
                                                op_name(lane[l]->op));
      aborted_ = true;
      for (uint32_t k = 0; k < kSimdWidth; ++k)
        if (lane[k]) lane[k]->state = State::Done;  // never resumed
      return;
    }
  }
  const uint8_t op8 = lead.op;
  if (op8 == kSimdBarrierOp) {
    ++sg_epoch_[sg];
  } else {
    const auto op = static_cast<SimdOp>(op8);
    const SimdType t = lead.type;
    const bool uniform_arg =
        op == SimdOp::ShuffleXor || op == SimdOp::ShuffleUp || op == SimdOp::ShuffleDown || op == SimdOp::Broadcast;
    if (uniform_arg)
      for (uint32_t l = 0; l < kSimdWidth; ++l)
        if (lane[l] && lane[l]->arg != lead.arg) {
          report(ViolationKind::NonUniformArgument, std::string(op_name(op8)) + " in SIMD group " + std::to_string(sg) +
                                                        ": lane " + std::to_string(l) + " passes " +
                                                        std::to_string(lane[l]->arg) + ", lane " +
                                                        std::to_string(first) + " " + std::to_string(lead.arg));
          break;
        }
    uint32_t val[kSimdWidth];
    for (uint32_t l = 0; l < kSimdWidth; ++l) val[l] = lane[l] ? lane[l]->bits : identity(op, t);
    auto read_lane = [&](uint32_t l, uint32_t src) -> uint32_t {
      if (src < kSimdWidth && lane[src]) return val[src];
      report(ViolationKind::InactiveLane, std::string(op_name(op8)) + " in SIMD group " + std::to_string(sg) +
                                              ": lane " + std::to_string(l) + " reads lane " + std::to_string(src) +
                                              ", which is not active");
      return 0;
    };
    switch (op) {
      case SimdOp::Sum:
      case SimdOp::Product:
      case SimdOp::Max:
      case SimdOp::Min:
      case SimdOp::And:
      case SimdOp::Or:
      case SimdOp::Xor: {
        // The fixed tree: an xor butterfly, offsets 16, 8, 4, 2, 1 (every lane ends with lane 0's value).
        uint32_t cur[kSimdWidth];
        std::copy(val, val + kSimdWidth, cur);
        for (uint32_t off = kSimdWidth / 2; off >= 1; off /= 2) {
          uint32_t nxt[kSimdWidth];
          for (uint32_t l = 0; l < kSimdWidth; ++l) nxt[l] = combine(op, t, cur[l & ~off], cur[l | off]);
          std::copy(nxt, nxt + kSimdWidth, cur);
        }
        for (uint32_t l = 0; l < kSimdWidth; ++l)
          if (lane[l]) lane[l]->result = cur[l];
        break;
      }
      case SimdOp::PrefixExclusiveSum:
      case SimdOp::PrefixInclusiveSum: {
        uint32_t acc = identity(SimdOp::Sum, t);
        for (uint32_t l = 0; l < kSimdWidth; ++l) {
          if (!lane[l]) continue;
          if (op == SimdOp::PrefixExclusiveSum) {
            lane[l]->result = acc;
            acc = combine(SimdOp::Sum, t, acc, val[l]);
          } else {
            acc = combine(SimdOp::Sum, t, acc, val[l]);
            lane[l]->result = acc;
          }
        }
        break;
      }
      case SimdOp::Shuffle:
      case SimdOp::Broadcast:
        for (uint32_t l = 0; l < kSimdWidth; ++l)
          if (lane[l]) lane[l]->result = read_lane(l, lane[l]->arg);
        break;
      case SimdOp::ShuffleXor:
        for (uint32_t l = 0; l < kSimdWidth; ++l)
          if (lane[l]) lane[l]->result = read_lane(l, l ^ (lane[l]->arg & (kSimdWidth - 1)));
        break;
      case SimdOp::ShuffleDown:
        for (uint32_t l = 0; l < kSimdWidth; ++l)
          if (lane[l]) lane[l]->result = l + lane[l]->arg < kSimdWidth ? read_lane(l, l + lane[l]->arg) : val[l];
        break;
      case SimdOp::ShuffleUp:
        for (uint32_t l = 0; l < kSimdWidth; ++l)
          if (lane[l]) lane[l]->result = lane[l]->arg <= l ? read_lane(l, l - lane[l]->arg) : val[l];
        break;
      case SimdOp::BroadcastFirst:
        for (uint32_t l = 0; l < kSimdWidth; ++l)
          if (lane[l]) lane[l]->result = val[first];
        break;
      case SimdOp::Any:
      case SimdOp::All:
      case SimdOp::Ballot: {
        uint64_t mask = 0;
        bool any = false, all = true;
        for (uint32_t l = 0; l < kSimdWidth; ++l) {
          if (!lane[l]) continue;
          const bool p = val[l] != 0;
          any |= p;
          all &= p;
          if (p) mask |= uint64_t{1} << l;
        }
        for (uint32_t l = 0; l < kSimdWidth; ++l) {
          if (!lane[l]) continue;
          lane[l]->result = op == SimdOp::Any ? any : op == SimdOp::All ? all : static_cast<uint32_t>(mask);
          lane[l]->result64 = mask;
        }
        break;
      }
    }
  }
  for (uint32_t l = 0; l < kSimdWidth; ++l)
    if (lane[l]) lane[l]->state = State::Runnable;
}

// ---- threadgroup memory

void TgArena::check(uint32_t off, uint32_t n, uint32_t begin, uint32_t end) {
  if (off >= begin && off <= end && n <= end - off) return;
  GroupRunner& r = *runner_;
  char msg[160];
  std::snprintf(msg, sizeof msg, "thread %u accesses bytes [%lld, %lld) of a threadgroup region of %u bytes",
                r.current().pos.index, static_cast<long long>(off) - begin, static_cast<long long>(off) - begin + n,
                end - begin);
  r.fatal(ViolationKind::OutOfBounds, msg);
}

void TgArena::on_read(uint32_t off, uint32_t n, uint32_t begin, uint32_t end) {
  check(off, n, begin, end);  // does not return when out of bounds
  GroupRunner& r = *runner_;
  if (!r.detect_races()) return;
  const uint32_t t = r.current().pos.index;
  const uint64_t now = r.stamp_of(t);
  bool raced = false, uninit = false;
  int32_t other = -1;
  for (uint32_t i = off; i < off + n; ++i) {
    Shadow& s = shadow_[i];
    if (s.w_stamp == 0) {
      uninit = true;
    } else if (s.w_thread != static_cast<int32_t>(t) && !r.ordered(s.w_stamp, s.w_thread, now, t)) {
      raced = true;
      other = s.w_thread;
    }
    if (s.r_thread != -1 && (s.r_stamp >> 32) == (now >> 32) && s.r_thread != static_cast<int32_t>(t))
      s.r_thread = -2;
    else if (s.r_thread != -2 || (s.r_stamp >> 32) != (now >> 32))
      s.r_thread = static_cast<int32_t>(t);
    s.r_stamp = now;
  }
  if (uninit)
    r.report(ViolationKind::UninitialisedRead,
             "thread " + std::to_string(t) + " reads threadgroup bytes [" + std::to_string(off - begin) + ", " +
                 std::to_string(off - begin + n) + ") that no thread of the group wrote");
  if (raced)
    r.report(ViolationKind::Race, "thread " + std::to_string(t) + " reads threadgroup bytes [" +
                                      std::to_string(off - begin) + ", " + std::to_string(off - begin + n) +
                                      ") written by thread " + std::to_string(other) + " in the same barrier interval");
}

void TgArena::on_write(uint32_t off, uint32_t n, uint32_t begin, uint32_t end) {
  check(off, n, begin, end);
  GroupRunner& r = *runner_;
  if (!r.detect_races()) return;
  const uint32_t t = r.current().pos.index;
  const uint64_t now = r.stamp_of(t);
  bool raced = false;
  std::string with;
  for (uint32_t i = off; i < off + n; ++i) {
    Shadow& s = shadow_[i];
    if (s.w_stamp != 0 && s.w_thread != static_cast<int32_t>(t) && !r.ordered(s.w_stamp, s.w_thread, now, t)) {
      raced = true;
      with = "written by thread " + std::to_string(s.w_thread);
    } else if (s.r_thread == -2 && (s.r_stamp >> 32) == (now >> 32)) {
      raced = true;
      with = "read by several threads";
    } else if (s.r_thread >= 0 && s.r_thread != static_cast<int32_t>(t) && !r.ordered(s.r_stamp, s.r_thread, now, t)) {
      raced = true;
      with = "read by thread " + std::to_string(s.r_thread);
    }
    s.w_stamp = now;
    s.w_thread = static_cast<int32_t>(t);
  }
  if (raced)
    r.report(ViolationKind::Race, "thread " + std::to_string(t) + " writes threadgroup bytes [" +
                                      std::to_string(off - begin) + ", " + std::to_string(off - begin + n) + ") " +
                                      with + " in the same barrier interval");
}

TgArena* current_arena() { return &runner().arena(); }

void threadgroup_region(int index, uint32_t& begin, uint32_t& end) {
  GroupRunner& r = runner();
  if (index < 0 || index >= kMaxThreadgroupArgs)
    throw_error(ErrorKind::Internal, "emulator: [[threadgroup(" + std::to_string(index) + ")]] is out of range");
  begin = r.region_begin(index);
  end = r.region_end(index);
}

// ---- intrinsics

void threadgroup_barrier_impl() { runner().barrier(); }

void simdgroup_barrier_impl() { runner().collective(GroupRunner::kSimdBarrierOp, SimdType::U32, 0, 0, nullptr); }

uint32_t simd_collective(SimdOp op, SimdType type, uint32_t v, uint32_t arg) {
  return runner().collective(static_cast<uint8_t>(op), type, v, arg, nullptr);
}

uint64_t simd_ballot_impl(bool pred) {
  uint64_t mask = 0;
  runner().collective(static_cast<uint8_t>(SimdOp::Ballot), SimdType::U32, pred ? 1u : 0u, 0, &mask);
  return mask;
}

// ---- dispatch

Emulator::Emulator(Options opt) : opt_(opt) {}
Emulator::~Emulator() = default;

void Emulator::clear_violations() {
  std::lock_guard<std::mutex> lock(mu_);
  violations_.clear();
  n_violations_ = 0;
}

void Emulator::record(ViolationKind k, const std::string& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  ++n_violations_;
  if (static_cast<int>(violations_.size()) < opt_.max_recorded) violations_.push_back({k, msg});
}

void Emulator::dispatch(const Launch& l) {
  if (l.fn == nullptr) throw_error(ErrorKind::Value, "emulator: launch without a kernel");
  const uint64_t threads = l.group.count();
  if (threads == 0 || threads > kMaxThreadsPerGroup)
    throw_error(ErrorKind::Value, std::string("emulator: ") + l.name + ": " + std::to_string(threads) +
                                      " threads per threadgroup (must be 1.." + std::to_string(kMaxThreadsPerGroup) +
                                      ")");
  uint32_t rb[kMaxThreadgroupArgs], re[kMaxThreadgroupArgs];
  uint32_t total = 0;
  for (int i = 0; i < kMaxThreadgroupArgs; ++i) {
    rb[i] = total;
    total += (l.tg_bytes[i] + 15u) / 16u * 16u;  // Metal rounds threadgroup lengths to 16 bytes
    re[i] = rb[i] + l.tg_bytes[i];
    if (total > kMaxThreadgroupMemory)
      throw_error(ErrorKind::Value, std::string("emulator: ") + l.name + ": " + std::to_string(total) +
                                        " bytes of threadgroup memory (at most " +
                                        std::to_string(kMaxThreadgroupMemory) + ")");
  }
  const uint64_t groups = l.grid.count();
  if (groups == 0) return;
  const uint64_t before = n_violations_;
  auto run_range = [&](int64_t b, int64_t e) {
    GroupRunner& r = local_runner();
    const uint64_t sw0 = r.switches, th0 = r.threads;
    for (int64_t g = b; g < e; ++g) r.run(*this, opt_, l, rb, re, total, static_cast<uint64_t>(g));
    std::lock_guard<std::mutex> lock(mu_);
    switches_ += r.switches - sw0;
    threads_run_ += r.threads - th0;
  };
  if (opt_.pool != nullptr && opt_.pool->size() > 1 && groups > 1) {
    auto ref = [&run_range](int64_t b, int64_t e) { run_range(b, e); };
    opt_.pool->parallel_for(static_cast<int64_t>(groups), 1, ref);
  } else {
    run_range(0, static_cast<int64_t>(groups));
  }
  if (opt_.throw_on_violation && n_violations_ > before) {
    std::string first = "(not recorded: more than max_recorded violations)";
    if (before < violations_.size())
      first = std::string(violation_name(violations_[before].kind)) + ": " + violations_[before].message;
    throw_error(ErrorKind::Internal, "emulator: " + std::to_string(n_violations_ - before) + " violation(s) in " +
                                         l.name + "; first: " + first);
  }
}

}  // namespace strata::emu
