// ShutdownSignals: a sigwait thread turns SIGTERM/SIGINT into a drain request, a repeat or an exit.
#include "server/shutdown_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include <spdlog/spdlog.h>

namespace tandem::server {
namespace {

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

const char* signal_name(int signo) {
  return signo == SIGTERM ? "SIGTERM" : "SIGINT";
}

}  // namespace

SignalAction ShutdownSignalPolicy::on_signal(int signo, std::chrono::steady_clock::time_point now,
                                             bool exit_at_once) {
  if (exit_at_once) return SignalAction::kExitNow;
  if (!first_signal_.has_value()) {
    first_signal_ = signo;
    first_at_ = now;
    return SignalAction::kDrain;
  }
  if (signo == SIGTERM && *first_signal_ == SIGTERM && now - first_at_ < kRepeatedSigtermWindow) {
    return SignalAction::kRepeat;
  }
  return SignalAction::kForceExit;
}

void ShutdownSignals::block_in_this_thread() {
  const sigset_t set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

ShutdownSignals& ShutdownSignals::install() {
  static ShutdownSignals* instance = [] {
    block_in_this_thread();
    auto* signals = new ShutdownSignals();  // lives as long as the process
    std::thread([signals] { signals->watch(); }).detach();
    return signals;
  }();
  return *instance;
}

void ShutdownSignals::watch() {
  const sigset_t set = shutdown_set();
  ShutdownSignalPolicy policy;
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    const SignalAction action = policy.on_signal(sig, std::chrono::steady_clock::now(),
                                                 exit_at_once_.load(std::memory_order_acquire));
    switch (action) {
      case SignalAction::kExitNow:
        spdlog::info("{} while starting: exiting", signal_name(sig));
        spdlog::default_logger()->flush();
        _exit(0);
      case SignalAction::kDrain:
        spdlog::info(
            "{}: draining (another signal exits at once; a SIGTERM repeated within {} ms "
            "is the same request)",
            signal_name(sig), kRepeatedSigtermWindow.count());
        notify();
        break;
      case SignalAction::kRepeat:
        spdlog::info("SIGTERM again within {} ms: the same request, still draining",
                     kRepeatedSigtermWindow.count());
        break;
      case SignalAction::kForceExit:
        spdlog::warn("second {}: exiting without finishing the drain", signal_name(sig));
        spdlog::default_logger()->flush();
        _exit(kExitInterrupted);
    }
  }
}

void ShutdownSignals::notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requested_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

bool ShutdownSignals::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return requested(); });
}

}  // namespace tandem::server
