// Fibers for the CUDA emulation's thread blocks (thread_blocks.h): one ucontext per CUDA thread,
// a scheduler that runs every ready fiber until it waits or returns, then releases the barriers
// that every live participant has reached.
#include "kernels/cuda/emulation/thread_blocks.h"

#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "base/check.h"

#if defined(__x86_64__)
// Saves the callee-saved registers (System V: rbx, rbp, r12-r15, MXCSR and the x87 control
// word) on the current stack, stores its pointer at *save_sp, and resumes the stack at load_sp
// the same way. Unlike swapcontext it makes no system call (the signal mask is left alone), which
// is most of a switch's cost; kernels switch at every barrier and shuffle.
extern "C" void tandem_cuda_emulation_switch(void** save_sp, void* load_sp);
asm(R"(
  .text
  .p2align 4
  .globl tandem_cuda_emulation_switch
  .hidden tandem_cuda_emulation_switch
  .type tandem_cuda_emulation_switch, @function
tandem_cuda_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tandem_cuda_emulation_switch, .-tandem_cuda_emulation_switch
)");
#endif

namespace tandem::cuda_emulation {
namespace {

// Each fiber's stack, below one inaccessible guard page (an overflow faults instead of corrupting
// the next fiber's stack). Kernels keep a few small arrays; libm needs a little more.
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kGuardBytes = 4096;

enum class FiberState { kReady, kAtBlockBarrier, kAtWarpBarrier, kReturned };

struct Fiber {
#if defined(__x86_64__)
  void* sp = nullptr;  // the saved stack pointer while switched out
#else
  ucontext_t context{};
#endif
  void* mapping = nullptr;  // guard page + stack
  FiberState state = FiberState::kReady;
  ThreadCoords coords;
  unsigned linear = 0;        // x fastest, then y, then z
  unsigned shuffle_mask = 0;  // while kAtWarpBarrier

  Fiber() {
    mapping = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    TANDEM_CHECK(mapping != MAP_FAILED);
    TANDEM_CHECK(mprotect(mapping, kGuardBytes, PROT_NONE) == 0);
  }
  ~Fiber() {
    munmap(mapping, kGuardBytes + kStackBytes);
  }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
};

// A warp's exchange slots. A shuffle writes slot[phase][lane] and reads slot[phase][src] after
// the release, which flips the phase: the next shuffle writes the other half, so no lane can
// overwrite a value another lane has not read yet.
struct Warp {
  uint64_t slots[2][kWarpSize] = {};
  unsigned phase = 0;
};

class Scheduler {
 public:
  std::string run(const dim3& grid, const dim3& block, void (*body)(void*), void* context) {
    const unsigned n = block.x * block.y * block.z;
    while (fibers_.size() < n) fibers_.push_back(std::make_unique<Fiber>());
    warps_.assign((n + kWarpSize - 1) / kWarpSize, Warp{});
    body_ = body;
    context_ = context;
    error_.clear();
    for (unsigned bz = 0; bz < grid.z; ++bz) {
      for (unsigned by = 0; by < grid.y; ++by) {
        for (unsigned bx = 0; bx < grid.x; ++bx) {
          run_block(uint3{bx, by, bz}, grid, block, n);
          if (!error_.empty()) {
            return error_ + " (block " + std::to_string(bx) + "," + std::to_string(by) + "," +
                   std::to_string(bz) + ")";
          }
        }
      }
    }
    return {};
  }

  const ThreadCoords& current() const {
    TANDEM_CHECK(current_ != nullptr);
    return current_->coords;
  }
  unsigned lane() const { return current_->linear % kWarpSize; }

  void wait_block() {
    current_->state = FiberState::kAtBlockBarrier;
    switch_out();
  }

  uint64_t exchange(unsigned mask, uint64_t bits, unsigned src_lane) {
    Fiber& self = *current_;
    Warp& warp = warps_[self.linear / kWarpSize];
    const unsigned phase = warp.phase;
    warp.slots[phase][self.linear % kWarpSize] = bits;
    self.shuffle_mask = mask;
    self.state = FiberState::kAtWarpBarrier;
    switch_out();
    return warp.slots[phase][src_lane % kWarpSize];
  }

 private:
  static void fiber_main();

#if defined(__x86_64__)
  // A fresh stack whose first switch "returns" into fiber_main, with the frame
  // tandem_cuda_emulation_switch pops: MXCSR and control word, six zeroed registers, the entry.
  void start_context(Fiber& f) {
    auto top = reinterpret_cast<uintptr_t>(f.mapping) + kGuardBytes + kStackBytes;
    top &= ~uintptr_t{15};
    auto* frame = reinterpret_cast<uint64_t*>(top - 8 - 8 * 8);  // entry at rsp % 16 == 8
    uint32_t mxcsr = 0;
    uint16_t fcw = 0;
    asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fcw));
    frame[0] = static_cast<uint64_t>(mxcsr) | (static_cast<uint64_t>(fcw) << 32);
    for (int i = 1; i <= 6; ++i) frame[i] = 0;
    frame[7] = reinterpret_cast<uint64_t>(&Scheduler::fiber_main);
    f.sp = frame;
  }
  void switch_in(Fiber& f) {
    tandem_cuda_emulation_switch(&scheduler_sp_, f.sp);
  }
  void switch_out() {
    tandem_cuda_emulation_switch(&current_->sp, scheduler_sp_);
  }
#else
  // A fresh context that enters fiber_main on the fiber's stack.
  // Out of line: getcontext may return twice, which would clobber run_block's loop variables.
  [[gnu::noinline]] void start_context(Fiber& f) {
    TANDEM_CHECK(getcontext(&f.context) == 0);
    f.context.uc_stack.ss_sp = static_cast<char*>(f.mapping) + kGuardBytes;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, &Scheduler::fiber_main, 0);
  }
  void switch_in(Fiber& f) {
    TANDEM_CHECK(swapcontext(&scheduler_, &f.context) == 0);
  }
  void switch_out() {
    TANDEM_CHECK(swapcontext(&current_->context, &scheduler_) == 0);
  }
#endif

  void run_block(const uint3& block_idx, const dim3& grid, const dim3& block, unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      Fiber& f = *fibers_[i];
      f.state = FiberState::kReady;
      f.linear = i;
      f.coords.thread_idx = uint3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
      f.coords.block_idx = block_idx;
      f.coords.block_dim = block;
      f.coords.grid_dim = grid;
      start_context(f);
    }
    for (Warp& w : warps_) w.phase = 0;
    const bool reverse = (blocks_run_++ % 2) == 1;
    for (;;) {
      for (unsigned k = 0; k < n; ++k) {
        Fiber& f = *fibers_[reverse ? n - 1 - k : k];
        if (f.state != FiberState::kReady) continue;
        current_ = &f;
        switch_in(f);
        current_ = nullptr;
      }
      unsigned live = 0, at_block = 0;
      for (unsigned i = 0; i < n; ++i) {
        live += fibers_[i]->state != FiberState::kReturned;
        at_block += fibers_[i]->state == FiberState::kAtBlockBarrier;
      }
      if (live == 0) return;
      bool released = release_warps(n);
      if (!error_.empty()) return;
      if (at_block == live) {
        for (unsigned i = 0; i < n; ++i) {
          if (fibers_[i]->state == FiberState::kAtBlockBarrier) {
            fibers_[i]->state = FiberState::kReady;
          }
        }
        released = true;
      }
      // Every live fiber waits: a warp with lanes at a shuffle was released or refused above,
      // so the rest all wait at __syncthreads.
      TANDEM_CHECK(released);
    }
  }

  // Releases every warp whose waiting lanes are all the lanes their masks name; a mask naming a
  // lane that has returned or waits at __syncthreads is an error (undefined on the hardware).
  bool release_warps(unsigned n) {
    bool released = false;
    for (unsigned w = 0; w < warps_.size(); ++w) {
      const unsigned first = w * kWarpSize;
      const unsigned lanes = std::min(kWarpSize, n - first);
      unsigned waiting = 0;
      for (unsigned l = 0; l < lanes; ++l) {
        if (fibers_[first + l]->state == FiberState::kAtWarpBarrier) waiting |= 1u << l;
      }
      if (waiting == 0) continue;
      for (unsigned l = 0; l < lanes; ++l) {
        const Fiber& f = *fibers_[first + l];
        if (f.state != FiberState::kAtWarpBarrier) continue;
        if ((f.shuffle_mask & waiting) != f.shuffle_mask || (f.shuffle_mask >> l & 1u) == 0) {
          error_ = "warp " + std::to_string(w) + " lane " + std::to_string(l) +
                   ": a shuffle with mask " + hex(f.shuffle_mask) +
                   " while the lanes at a shuffle are " + hex(waiting) +
                   " (a named lane has returned, waits at __syncthreads, or does not exist)";
          return false;
        }
      }
      for (unsigned l = 0; l < lanes; ++l) {
        if (waiting >> l & 1u) fibers_[first + l]->state = FiberState::kReady;
      }
      warps_[w].phase ^= 1u;
      released = true;
    }
    return released;
  }

  static std::string hex(unsigned v) {
    static const char* digits = "0123456789abcdef";
    std::string s = "0x";
    for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xfu];
    return s;
  }

  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<Warp> warps_;
#if defined(__x86_64__)
  void* scheduler_sp_ = nullptr;
#else
  ucontext_t scheduler_{};
#endif
  Fiber* current_ = nullptr;
  void (*body_)(void*) = nullptr;
  void* context_ = nullptr;
  std::string error_;
  uint64_t blocks_run_ = 0;
};

thread_local std::unique_ptr<Scheduler> t_scheduler;

Scheduler& scheduler() {
  if (!t_scheduler) t_scheduler = std::make_unique<Scheduler>();
  return *t_scheduler;
}

// A fiber's first frame: runs the kernel body, then switches out for good (never returns).
void Scheduler::fiber_main() {
  Scheduler& s = scheduler();
  s.body_(s.context_);
  s.current_->state = FiberState::kReturned;
  s.switch_out();
  TANDEM_CHECK_MSG(false, "a returned CUDA emulation fiber was resumed");
}

}  // namespace

const ThreadCoords& current_thread() {
  return scheduler().current();
}

std::string run_grid(const dim3& grid, const dim3& block, void (*body)(void*), void* context) {
  return scheduler().run(grid, block, body, context);
}

void sync_threads() {
  scheduler().wait_block();
}

uint64_t warp_exchange(unsigned mask, uint64_t bits, unsigned src_lane) {
  return scheduler().exchange(mask, bits, src_lane);
}

unsigned lane_id() {
  return scheduler().lane();
}

}  // namespace tandem::cuda_emulation
