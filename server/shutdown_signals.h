// ShutdownSignals: SIGTERM / SIGINT handling for tandemd — the first asks for a graceful drain,
// a later one exits at once; a SIGTERM repeated within a second is the same request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

namespace tandem::server {

// Exit code of a second signal (the drain was cut short).
inline constexpr int kExitInterrupted = 1;

// A SIGTERM this soon after the first SIGTERM repeats the same request instead of forcing the
// exit: GNU `timeout` (and other supervisors) signal the child and then its process group, so one
// stop arrives twice within milliseconds.
inline constexpr std::chrono::milliseconds kRepeatedSigtermWindow{1000};

// What one shutdown signal does.
enum class SignalAction {
  kExitNow,    // nothing to drain (starting up): exit 0
  kDrain,      // the first request: drain, then exit 0
  kRepeat,     // the same request again (a SIGTERM within kRepeatedSigtermWindow): ignored
  kForceExit,  // a later request while draining: exit kExitInterrupted at once
};

// The decision, apart from the signals themselves. Not thread-safe (the watcher thread owns it).
class ShutdownSignalPolicy {
 public:
  // `signo` is SIGTERM or SIGINT; `now` its arrival; `exit_at_once` whether there is nothing to
  // drain yet. Rules: exit_at_once -> kExitNow; the first signal -> kDrain; a SIGTERM less than
  // kRepeatedSigtermWindow after a first SIGTERM -> kRepeat; anything else (a later SIGTERM, any
  // second SIGINT, SIGINT after SIGTERM or the reverse) -> kForceExit.
  SignalAction on_signal(int signo, std::chrono::steady_clock::time_point now, bool exit_at_once);

 private:
  std::optional<int> first_signal_;
  std::chrono::steady_clock::time_point first_at_{};
};

// One per process. block_in_this_thread() should run first thing in the process (tandemd calls it
// from .preinit_array, before any constructor; it only calls pthread_sigmask): it blocks SIGTERM
// and SIGINT in the calling thread, so that every later thread inherits the mask, the signals are
// never delivered asynchronously, and a signal sent while the process starts stays pending instead
// of killing it. install() (in main, before any other thread starts) blocks them too and starts a
// watcher thread that takes them with sigwait. Until set_exit_at_once(false) (nothing needs
// draining while the model loads) a signal exits with code 0.
class ShutdownSignals {
 public:
  static void block_in_this_thread();
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
  std::atomic<bool> exit_at_once_{true};
  std::mutex mu_;
  std::condition_variable cv_;
};

}  // namespace tandem::server
