// ThreadPool: a fixed set of worker threads running parallel_for over an index range.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

// A pool of n_threads - 1 worker threads plus the calling thread. parallel_for cuts [begin, end)
// into fixed chunks of `grain` indices (the last may be shorter) and hands them out to whichever
// thread is free; every index is processed by exactly one call of fn, and the chunk boundaries
// depend only on (begin, end, grain), never on the thread count or on timing. So a kernel whose
// output elements depend only on their own index gives bit-identical results for any number of
// threads.
//
// Hand-off cost: a decode step runs a few parallel_for per layer, each lasting tens of
// microseconds to a few milliseconds, so idle workers spin (with the CPU's pause hint) for about
// kSpinMicros before they sleep on a condition variable, and the caller spins the same way while
// it waits for the last chunk. A job handed to spinning workers starts within a few hundred
// nanoseconds; between requests the workers sleep and cost nothing. Every 64 pauses a spinner
// yields its CPU (sched_yield): on a machine with more runnable threads than cores, a spinner
// otherwise holds the core the thread it waits for needs (2-vCPU Zen 4 with two busy processes
// beside tandem: decode 14.8-18.8 -> 40.6-41.5 tok/s; on a quiet machine the same within noise).
//
// Ownership and threads: the pool owns its threads and joins them on destruction. parallel_for
// may be called from ONE thread at a time (the pool's owner; it is not re-entrant: fn must not
// call parallel_for on the same pool). It returns after every chunk has finished. fn must not
// throw.
class ThreadPool {
 public:
  // How long idle threads spin before they sleep.
  static constexpr int kSpinMicros = 200;

  // n_threads <= 0 means std::thread::hardware_concurrency() (at least 1). n_threads == 1 runs
  // everything on the calling thread.
  explicit ThreadPool(int n_threads);
  // The same, with worker i (i = 1 .. n - 1; thread 0 is the caller, which the pool leaves alone)
  // pinned to CPU thread_cpus[i % thread_cpus.size()] (numa.h's spread_over_nodes); empty
  // thread_cpus pins nothing. A pin the system refuses leaves that worker unpinned
  // (pinned_workers() counts the others).
  ThreadPool(int n_threads, const std::vector<int>& thread_cpus);
  // The thread count a pool of n_threads gets (the caller included).
  static size_t thread_count(int n_threads);
  // Workers pinned to a CPU.
  size_t pinned_workers() const { return pinned_; }
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that take part in parallel_for, the caller included.
  size_t n_threads() const { return workers_.size() + 1; }

  // Calls fn(chunk_begin, chunk_end) for every chunk of [begin, end). grain 0 is treated as 1.
  void parallel_for(size_t begin, size_t end, size_t grain,
                    const std::function<void(size_t, size_t)>& fn);

  // A grain that gives about 4 chunks per thread for a range of n indices (at least min_grain).
  size_t grain_for(size_t n, size_t min_grain = 1) const;

 private:
  void worker_loop();
  void run_chunks();

  std::vector<std::thread> workers_;
  size_t pinned_ = 0;
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;                    // guarded by mutex_; also published through generation_
  size_t sleeping_ = 0;                  // workers waiting on start_cv_, guarded by mutex_
  bool caller_waiting_ = false;          // the caller waits on done_cv_, guarded by mutex_
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) for each job and for stop
  std::atomic<size_t> pending_{0};       // workers that have not finished the current job
  std::atomic<size_t> next_chunk_{0};
  // The current job: written by the caller before generation_ is bumped, read by workers after
  // they see the new generation.
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t job_end_ = 0;
  size_t job_grain_ = 1;
};

}  // namespace tandem
