// ThreadPool: fixed workers that spin briefly, then sleep; chunked parallel_for with the caller
// taking part.
#include "base/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace tandem {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() holds or about ThreadPool::kSpinMicros have passed, yielding the CPU every 64
// pauses (thread_pool.h); whether done() holds.
template <typename Done>
bool spin_until(Done done) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point limit = Clock::now() + std::chrono::microseconds(ThreadPool::kSpinMicros);
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (Clock::now() >= limit) return done();
    std::this_thread::yield();
  }
}

}  // namespace

size_t ThreadPool::thread_count(int n_threads) {
  const size_t n =
      n_threads > 0 ? static_cast<size_t>(n_threads) : std::thread::hardware_concurrency();
  return std::max<size_t>(1, n);
}

ThreadPool::ThreadPool(int n_threads) : ThreadPool(n_threads, {}) {}

ThreadPool::ThreadPool(int n_threads, const std::vector<int>& thread_cpus) {
  const size_t n = thread_count(n_threads);
  workers_.reserve(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) {
    workers_.emplace_back([this] { worker_loop(); });
    if (thread_cpus.empty()) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(thread_cpus[(i + 1) % thread_cpus.size()], &set);
    if (pthread_setaffinity_np(workers_.back().native_handle(), sizeof(set), &set) == 0) ++pinned_;
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

size_t ThreadPool::grain_for(size_t n, size_t min_grain) const {
  const size_t chunks = 4 * n_threads();
  return std::max<size_t>({min_grain, 1, (n + chunks - 1) / chunks});
}

void ThreadPool::run_chunks() {
  const size_t end = job_end_;
  const size_t grain = job_grain_;
  for (;;) {
    const size_t b = next_chunk_.fetch_add(grain, std::memory_order_relaxed);
    if (b >= end) return;
    (*fn_)(b, std::min(end, b + grain));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleeping_;
      start_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      --sleeping_;
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;
    }
    run_chunks();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (caller_waiting_) done_cv_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(size_t begin, size_t end, size_t grain,
                              const std::function<void(size_t, size_t)>& fn) {
  if (begin >= end) return;
  grain = std::max<size_t>(grain, 1);
  if (workers_.empty() || end - begin <= grain) {
    for (size_t b = begin; b < end; b += grain) fn(b, std::min(end, b + grain));
    return;
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    job_end_ = end;
    job_grain_ = grain;
    next_chunk_.store(begin, std::memory_order_relaxed);
    pending_.store(workers_.size(), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleeping_ != 0;
  }
  if (wake) start_cv_.notify_all();
  run_chunks();
  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    caller_waiting_ = true;
    done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    caller_waiting_ = false;
  }
  fn_ = nullptr;
}

}  // namespace tandem
