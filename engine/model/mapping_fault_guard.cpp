// The SIGBUS handler and its fixed table of guarded ranges (no allocation, no locks: the handler
// only reads atomics and calls mmap, a system call).
#include "engine/model/mapping_fault_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace tandem::model {
namespace {

constexpr int kSlots = 1024;  // shards of one checkpoint, and a few more

struct Range {
  std::atomic<uintptr_t> begin{0};  // 0: free slot
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

Range g_ranges[kSlots];
struct sigaction g_previous {};
std::once_flag g_installed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Range& r : g_ranges) {
    const uintptr_t begin = r.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= r.end.load(std::memory_order_acquire)) continue;
    // Zero pages over the whole mapping: every later read of it is harmless too (one mapping,
    // not one per faulting page). The mapping's owner reports the fault and stops using it.
    void* zeros = ::mmap(reinterpret_cast<void*>(begin), r.end.load() - begin, PROT_READ,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (zeros == MAP_FAILED) break;  // cannot recover: crash as without the guard
    r.faulted.store(true, std::memory_order_release);
    return;
  }
  // Not ours (or unrecoverable): the previous disposition handles the re-executed fault.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  ::sigemptyset(&fallback.sa_mask);
  ::sigaction(SIGBUS, &fallback, nullptr);  // the faulting instruction re-runs and dumps core
}

void install() {
  struct sigaction action {};
  action.sa_sigaction = &on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

int guard_mapping(const void* data, size_t size) {
  if (data == nullptr || size == 0) return -1;
  std::call_once(g_installed, install);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  for (int i = 0; i < kSlots; ++i) {
    uintptr_t expected = 0;
    Range& r = g_ranges[i];
    // Claim with a placeholder, then publish end before begin.
    if (r.end.compare_exchange_strong(expected, begin + size, std::memory_order_acq_rel)) {
      r.faulted.store(false, std::memory_order_relaxed);
      r.begin.store(begin, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unguard_mapping(int slot) {
  if (slot < 0 || slot >= kSlots) return;
  g_ranges[slot].begin.store(0, std::memory_order_release);
  g_ranges[slot].faulted.store(false, std::memory_order_relaxed);
  g_ranges[slot].end.store(0, std::memory_order_release);
}

bool mapping_faulted(int slot) {
  if (slot < 0 || slot >= kSlots) return false;
  return g_ranges[slot].faulted.load(std::memory_order_acquire);
}

bool in_guarded_mapping(const void* data, size_t size) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
  if (begin == 0 || size == 0) return false;
  for (const Range& r : g_ranges) {
    const uintptr_t b = r.begin.load(std::memory_order_acquire);
    if (b == 0 || begin < b) continue;
    const uintptr_t e = r.end.load(std::memory_order_acquire);
    if (begin < e && size <= e - begin) return !r.faulted.load(std::memory_order_acquire);
  }
  return false;
}

}  // namespace tandem::model
