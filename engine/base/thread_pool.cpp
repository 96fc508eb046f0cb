// ThreadPool: fixed workers, chunked parallel_for with the caller taking part.
#include "engine/base/thread_pool.h"

#include <algorithm>

namespace tandem {

ThreadPool::ThreadPool(int n_threads) {
  size_t n = n_threads > 0 ? static_cast<size_t>(n_threads) : std::thread::hardware_concurrency();
  n = std::max<size_t>(1, n);
  workers_.reserve(n - 1);
  for (size_t i = 0; i + 1 < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

size_t ThreadPool::grain_for(size_t n, size_t min_grain) const {
  const size_t chunks = 4 * n_threads();
  return std::max<size_t>({min_grain, 1, (n + chunks - 1) / chunks});
}

void ThreadPool::run_chunks() {
  for (;;) {
    size_t b = 0;
    size_t e = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_chunk_ >= job_end_) return;
      b = next_chunk_;
      e = std::min(job_end_, b + job_grain_);
      next_chunk_ = e;
    }
    (*fn_)(b, e);
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    run_chunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_workers_;
    }
    done_cv_.notify_one();
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    job_end_ = end;
    job_grain_ = grain;
    next_chunk_ = begin;
    busy_workers_ = workers_.size();
    ++generation_;
  }
  start_cv_.notify_all();
  run_chunks();
  std::unique_lock<std::mutex> lock(mutex_);
  done_cv_.wait(lock, [&] { return busy_workers_ == 0; });
  fn_ = nullptr;
}

}  // namespace tandem
