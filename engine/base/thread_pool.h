// ThreadPool: a fixed set of worker threads running parallel_for over an index range.
#pragma once

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
// Ownership and threads: the pool owns its threads and joins them on destruction. parallel_for
// may be called from ONE thread at a time (the pool's owner; it is not re-entrant: fn must not
// call parallel_for on the same pool). It returns after every chunk has finished. fn must not
// throw.
class ThreadPool {
 public:
  // n_threads <= 0 means std::thread::hardware_concurrency() (at least 1). n_threads == 1 runs
  // everything on the calling thread.
  explicit ThreadPool(int n_threads);
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
  std::mutex mutex_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  size_t busy_workers_ = 0;
  // The current job (valid while a parallel_for runs).
  const std::function<void(size_t, size_t)>* fn_ = nullptr;
  size_t job_end_ = 0;
  size_t job_grain_ = 1;
  size_t next_chunk_ = 0;  // guarded by mutex_
};

}  // namespace tandem
