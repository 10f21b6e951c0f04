#include "metal/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "strata/util/error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define STRATA_EMU_ASAN 1
#endif
#if defined(STRATA_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) || (defined(__aarch64__) && (defined(__linux__) || defined(__APPLE__)))
#define STRATA_EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif

namespace strata::emu {

// ---- stacks

FiberStack::FiberStack(std::size_t bytes) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  map_bytes_ = size_ + page;
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw_error(ErrorKind::IO, "emulator: cannot map a fiber stack of " + std::to_string(map_bytes_) + " bytes");
  }
  mprotect(map_, page, PROT_NONE);  // guard page below the stack (stacks grow down)
  base_ = static_cast<char*>(map_) + page;
}

FiberStack::~FiberStack() { release(); }

void FiberStack::release() {
  if (map_) munmap(map_, map_bytes_);
  map_ = nullptr;
  base_ = nullptr;
  map_bytes_ = size_ = 0;
}

FiberStack::FiberStack(FiberStack&& o) noexcept { *this = std::move(o); }

FiberStack& FiberStack::operator=(FiberStack&& o) noexcept {
  if (this != &o) {
    release();
    std::swap(map_, o.map_);
    std::swap(map_bytes_, o.map_bytes_);
    std::swap(base_, o.base_);
    std::swap(size_, o.size_);
  }
  return *this;
}

// ---- switching

namespace {

struct StartInfo {
  FiberEntry entry;
  void* arg;
};

thread_local FiberContext* t_from = nullptr;  // the context that switched most recently
thread_local StartInfo t_start{};             // filled just before a fresh fiber's first run

inline void before_switch(FiberContext& from, FiberContext& to, bool final_switch) {
  t_from = &from;
  if (to.fresh) {
    t_start = StartInfo{to.entry, to.arg};
    to.fresh = false;
  }
#if defined(STRATA_EMU_ASAN)
  __sanitizer_start_switch_fiber(final_switch ? nullptr : &from.fake_stack, to.stack_bottom, to.stack_size);
#else
  (void)final_switch;
#endif
}

inline void after_switch(FiberContext& self) {
#if defined(STRATA_EMU_ASAN)
  const void* bottom = nullptr;
  std::size_t size = 0;
  __sanitizer_finish_switch_fiber(self.fake_stack, &bottom, &size);
  if (t_from) {  // learn the bounds of the context that switched here (the scheduler's own stack)
    t_from->stack_bottom = bottom;
    t_from->stack_size = size;
  }
#else
  (void)self;
#endif
}

[[noreturn]] void fiber_start() {
#if defined(STRATA_EMU_ASAN)
  const void* bottom = nullptr;
  std::size_t size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &bottom, &size);
  if (t_from) {
    t_from->stack_bottom = bottom;
    t_from->stack_size = size;
  }
#endif
  const StartInfo info = t_start;
  info.entry(info.arg);
  std::abort();  // an entry ends with fiber_switch_final; returning here is a bug
}

void prepare(FiberContext& ctx, FiberStack& stack, FiberEntry entry, void* arg) {
#if defined(STRATA_EMU_ASAN)
  // Frames of a previous run never returned (fibers end by switching away): clear their redzones.
  __asan_unpoison_memory_region(stack.bottom(), stack.size());
#endif
  ctx.stack_bottom = stack.bottom();
  ctx.stack_size = stack.size();
  ctx.fake_stack = nullptr;
  ctx.entry = entry;
  ctx.arg = arg;
  ctx.fresh = true;
}

}  // namespace

#if defined(STRATA_EMU_ASM_SWITCH)

extern "C" void strata_emu_raw_switch(void** save_sp, void* new_sp);

#if defined(__APPLE__)
#define STRATA_EMU_SYM "_strata_emu_raw_switch"
#define STRATA_EMU_TYPE ""
#define STRATA_EMU_SIZE ""
#else
#define STRATA_EMU_SYM "strata_emu_raw_switch"
#define STRATA_EMU_TYPE ".type strata_emu_raw_switch,@function\n"
#define STRATA_EMU_SIZE ".size strata_emu_raw_switch,.-strata_emu_raw_switch\n"
#endif

#if defined(__x86_64__)
// System V: rbx, rbp, r12-r15 are callee-saved; the rest of the state lives on the stacks.
asm(".text\n"
    ".globl " STRATA_EMU_SYM "\n" STRATA_EMU_TYPE ".p2align 4\n" STRATA_EMU_SYM
    ":\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n" STRATA_EMU_SIZE);
#if !defined(__APPLE__)
asm(".section .note.GNU-stack,\"\",@progbits\n.text\n");
#endif

void* initial_sp(FiberStack& stack) {
  auto top = reinterpret_cast<uintptr_t>(stack.bottom()) + stack.size();
  top &= ~uintptr_t{15};
  auto* slot = reinterpret_cast<void**>(top);
  slot[-1] = nullptr;                                // fake return address of fiber_start
  slot[-2] = reinterpret_cast<void*>(&fiber_start);  // consumed by ret
  for (int i = 3; i <= 8; ++i) slot[-i] = nullptr;   // rbp rbx r12 r13 r14 r15
  return &slot[-8];
}
#else  // AArch64: x19-x28, fp, lr and d8-d15 are callee-saved.
asm(".text\n"
    ".globl " STRATA_EMU_SYM "\n" STRATA_EMU_TYPE ".p2align 2\n" STRATA_EMU_SYM
    ":\n"
    "  sub sp, sp, #176\n"
    "  stp x19, x20, [sp, #0]\n"
    "  stp x21, x22, [sp, #16]\n"
    "  stp x23, x24, [sp, #32]\n"
    "  stp x25, x26, [sp, #48]\n"
    "  stp x27, x28, [sp, #64]\n"
    "  stp x29, x30, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n"
    "  stp d10, d11, [sp, #112]\n"
    "  stp d12, d13, [sp, #128]\n"
    "  stp d14, d15, [sp, #144]\n"
    "  mov x2, sp\n"
    "  str x2, [x0]\n"
    "  mov sp, x1\n"
    "  ldp x19, x20, [sp, #0]\n"
    "  ldp x21, x22, [sp, #16]\n"
    "  ldp x23, x24, [sp, #32]\n"
    "  ldp x25, x26, [sp, #48]\n"
    "  ldp x27, x28, [sp, #64]\n"
    "  ldp x29, x30, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n"
    "  ldp d10, d11, [sp, #112]\n"
    "  ldp d12, d13, [sp, #128]\n"
    "  ldp d14, d15, [sp, #144]\n"
    "  add sp, sp, #176\n"
    "  ret\n" STRATA_EMU_SIZE);
#if !defined(__APPLE__)
asm(".section .note.GNU-stack,\"\",%progbits\n.text\n");
#endif

void* initial_sp(FiberStack& stack) {
  auto top = reinterpret_cast<uintptr_t>(stack.bottom()) + stack.size();
  top &= ~uintptr_t{15};
  auto* frame = reinterpret_cast<void**>(top - 176);
  for (int i = 0; i < 22; ++i) frame[i] = nullptr;
  frame[11] = reinterpret_cast<void*>(&fiber_start);  // x30 (lr): where ret goes
  return frame;
}
#endif

void fiber_init(FiberContext& ctx, FiberStack& stack, FiberEntry entry, void* arg) {
  prepare(ctx, stack, entry, arg);
  ctx.sp = initial_sp(stack);
}

void fiber_switch(FiberContext& from, FiberContext& to) {
  before_switch(from, to, false);
  strata_emu_raw_switch(&from.sp, to.sp);
  after_switch(from);
}

void fiber_switch_final(FiberContext& from, FiberContext& to) {
  before_switch(from, to, true);
  strata_emu_raw_switch(&from.sp, to.sp);
  std::abort();  // a finished fiber is never resumed
}

void fiber_destroy(FiberContext&) {}

#else  // ucontext fallback

void fiber_init(FiberContext& ctx, FiberStack& stack, FiberEntry entry, void* arg) {
  prepare(ctx, stack, entry, arg);
  if (!ctx.uctx) ctx.uctx = new ucontext_t{};
  auto* uc = static_cast<ucontext_t*>(ctx.uctx);
  getcontext(uc);
  uc->uc_stack.ss_sp = stack.bottom();
  uc->uc_stack.ss_size = stack.size();
  uc->uc_link = nullptr;
  makecontext(uc, reinterpret_cast<void (*)()>(&fiber_start), 0);
}

void fiber_switch(FiberContext& from, FiberContext& to) {
  if (!from.uctx) from.uctx = new ucontext_t{};
  before_switch(from, to, false);
  swapcontext(static_cast<ucontext_t*>(from.uctx), static_cast<ucontext_t*>(to.uctx));
  after_switch(from);
}

void fiber_switch_final(FiberContext& from, FiberContext& to) {
  if (!from.uctx) from.uctx = new ucontext_t{};
  before_switch(from, to, true);
  swapcontext(static_cast<ucontext_t*>(from.uctx), static_cast<ucontext_t*>(to.uctx));
  std::abort();
}

void fiber_destroy(FiberContext& ctx) {
  delete static_cast<ucontext_t*>(ctx.uctx);
  ctx.uctx = nullptr;
}

#endif

}  // namespace strata::emu
