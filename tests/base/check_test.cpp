// Tests of TANDEM_CHECK: a failed check aborts and names file:line and the expression.
#include "base/check.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <string>

namespace {

struct ChildResult {
  int signal = 0;
  std::string stderr_text;
};

// Runs fn in a forked child with stderr captured; returns the terminating signal and the text.
template <typename Fn>
ChildResult run_in_child(Fn fn) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    fn();
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) result.stderr_text.append(buf, size_t(n));
  close(fds[0]);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (WIFSIGNALED(wstatus)) result.signal = WTERMSIG(wstatus);
  return result;
}

TEST_CASE("TANDEM_CHECK passes silently when the condition holds", "[base]") {
  const ChildResult r = run_in_child([] { TANDEM_CHECK(1 + 1 == 2); });
  CHECK(r.signal == 0);
  CHECK(r.stderr_text.empty());
}

TEST_CASE("TANDEM_CHECK aborts with file, line and expression", "[base]") {
  const ChildResult r = run_in_child([] { TANDEM_CHECK(2 + 2 == 5); });
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.stderr_text, Catch::Contains("check_test.cpp:"));
  CHECK_THAT(r.stderr_text, Catch::Contains("check failed: 2 + 2 == 5"));
}

TEST_CASE("TANDEM_CHECK_MSG adds its message", "[base]") {
  const ChildResult r = run_in_child([] { TANDEM_CHECK_MSG(false, "queue corrupted"); });
  CHECK(r.signal == SIGABRT);
  CHECK_THAT(r.stderr_text, Catch::Contains("check failed: false: queue corrupted"));
}

}  // namespace
