#pragma once
// Cooperative fibers for the threadgroup emulator: every emulated GPU thread of a threadgroup runs on
// its own stack and gives control back at barriers and SIMD-group collectives. The switch saves only
// the callee-saved registers (a few nanoseconds; glibc's swapcontext makes a sigprocmask system call
// per switch, which costs microseconds in a VM). x86-64 and AArch64 have a hand-written switch; other
// targets fall back to ucontext.
#include <cstddef>
#include <cstdint>

namespace strata::emu {

// A stack for one fiber, mmap'd with a guard page below it (a stack overflow faults instead of
// silently corrupting a neighbour).
class FiberStack {
 public:
  FiberStack() = default;
  explicit FiberStack(std::size_t bytes);
  ~FiberStack();
  FiberStack(FiberStack&& o) noexcept;
  FiberStack& operator=(FiberStack&& o) noexcept;
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  void* bottom() const { return base_; }  // lowest usable address
  std::size_t size() const { return size_; }

 private:
  void release();
  void* map_ = nullptr;
  std::size_t map_bytes_ = 0;
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

// The saved state of a suspended execution context (a fiber or the scheduler's own stack).
struct FiberContext {
  void* sp = nullptr;    // saved stack pointer (hand-written switch)
  void* uctx = nullptr;  // ucontext_t* (fallback switch), allocated once and reused
  // What a fresh context runs on its first switch.
  void (*entry)(void*) = nullptr;
  void* arg = nullptr;
  bool fresh = false;
  // AddressSanitizer bookkeeping of the stack this context runs on.
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;
};

using FiberEntry = void (*)(void* arg);

// Prepares `ctx` so that the first switch to it calls entry(arg) on `stack` (again: a context may be
// re-initialised after it finished or was abandoned). entry must never return; it ends with
// fiber_switch_final.
void fiber_init(FiberContext& ctx, FiberStack& stack, FiberEntry entry, void* arg);
// Saves the current context into `from` and resumes `to`.
void fiber_switch(FiberContext& from, FiberContext& to);
// The last switch of a finished fiber (its stack is not resumed again until re-initialised).
[[noreturn]] void fiber_switch_final(FiberContext& from, FiberContext& to);
// Releases what the fallback switch allocated (no-op for the hand-written one).
void fiber_destroy(FiberContext& ctx);

}  // namespace strata::emu
