// ShutdownSignals: a sigwait thread turns SIGTERM/SIGINT into a drain request or an exit.
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

}  // namespace

ShutdownSignals& ShutdownSignals::install() {
  static ShutdownSignals* instance = [] {
    const sigset_t set = shutdown_set();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    auto* signals = new ShutdownSignals();  // lives as long as the process
    std::thread([signals] { signals->watch(); }).detach();
    return signals;
  }();
  return *instance;
}

void ShutdownSignals::watch() {
  const sigset_t set = shutdown_set();
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (exit_at_once_.load(std::memory_order_acquire)) {
      spdlog::info("{} while starting: exiting", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      spdlog::default_logger()->flush();
      _exit(0);
    }
    if (requested()) {
      spdlog::warn("second {}: exiting without finishing the drain",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT");
      spdlog::default_logger()->flush();
      _exit(kExitInterrupted);
    }
    spdlog::info("{}: draining (a second signal exits at once)",
                 sig == SIGTERM ? "SIGTERM" : "SIGINT");
    notify();
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
