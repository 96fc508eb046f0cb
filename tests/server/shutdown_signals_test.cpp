// Tests of the shutdown signal policy: drain on the first signal, a SIGTERM repeated within the
// window is the same request, anything later forces the exit; nothing to drain while starting.
#include "server/shutdown_signals.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>

namespace tandem::server {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST_CASE("a SIGTERM repeated within the window is the same request", "[server]") {
  ShutdownSignalPolicy policy;
  const Clock::time_point t0 = Clock::now();
  CHECK(policy.on_signal(SIGTERM, t0, false) == SignalAction::kDrain);
  // GNU timeout: the child, then its process group, microseconds apart.
  CHECK(policy.on_signal(SIGTERM, t0 + milliseconds(0), false) == SignalAction::kRepeat);
  CHECK(policy.on_signal(SIGTERM, t0 + milliseconds(5), false) == SignalAction::kRepeat);
  CHECK(policy.on_signal(SIGTERM, t0 + kRepeatedSigtermWindow - milliseconds(1), false) ==
        SignalAction::kRepeat);
  // A later SIGTERM is a second request: exit at once.
  CHECK(policy.on_signal(SIGTERM, t0 + kRepeatedSigtermWindow, false) == SignalAction::kForceExit);
}

TEST_CASE("SIGINT twice, or mixed signals, force the exit at once", "[server]") {
  const Clock::time_point t0 = Clock::now();
  ShutdownSignalPolicy twice;
  CHECK(twice.on_signal(SIGINT, t0, false) == SignalAction::kDrain);
  CHECK(twice.on_signal(SIGINT, t0 + milliseconds(5), false) == SignalAction::kForceExit);

  ShutdownSignalPolicy term_then_int;
  CHECK(term_then_int.on_signal(SIGTERM, t0, false) == SignalAction::kDrain);
  CHECK(term_then_int.on_signal(SIGINT, t0 + milliseconds(5), false) == SignalAction::kForceExit);

  ShutdownSignalPolicy int_then_term;
  CHECK(int_then_term.on_signal(SIGINT, t0, false) == SignalAction::kDrain);
  CHECK(int_then_term.on_signal(SIGTERM, t0 + milliseconds(5), false) == SignalAction::kForceExit);
}

TEST_CASE("while starting, any signal exits at once and starts no drain", "[server]") {
  ShutdownSignalPolicy policy;
  const Clock::time_point t0 = Clock::now();
  CHECK(policy.on_signal(SIGTERM, t0, true) == SignalAction::kExitNow);
  CHECK(policy.on_signal(SIGINT, t0, true) == SignalAction::kExitNow);
  // Nothing was recorded: once serving, the next signal is the first.
  CHECK(policy.on_signal(SIGTERM, t0 + milliseconds(1), false) == SignalAction::kDrain);
}

}  // namespace
}  // namespace tandem::server
