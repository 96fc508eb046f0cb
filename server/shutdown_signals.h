// ShutdownSignals: SIGTERM / SIGINT handling for tandemd — the first asks for a graceful drain,
// the second exits at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace tandem::server {

// Exit code of the second signal (the drain was cut short).
inline constexpr int kExitInterrupted = 1;

// One per process. install() must run in main before any other thread starts: it blocks SIGTERM
// and SIGINT in the calling thread (so every later thread inherits the mask and the signals are
// never delivered asynchronously) and starts a watcher thread that takes them with sigwait.
// While exit_at_once() is set (e.g. while the model loads and nothing needs draining) the first
// signal already exits with code 0.
class ShutdownSignals {
 public:
  static ShutdownSignals& install();

  // Waits up to `timeout` for the first signal; true once it arrived. Any thread.
  bool wait(std::chrono::milliseconds timeout);
  bool requested() const { return requested_.load(std::memory_order_acquire); }
  void set_exit_at_once(bool value) { exit_at_once_.store(value, std::memory_order_release); }
  // Test seam and the code path of a signal: as if SIGTERM arrived.
  void notify();

 private:
  ShutdownSignals() = default;
  void watch();

  std::atomic<bool> requested_{false};
  std::atomic<bool> exit_at_once_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace tandem::server
