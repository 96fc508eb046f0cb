// The abort path of TANDEM_CHECK.
#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace tandem::detail {

void check_failed(const char* file, int line, const char* expr, const char* message) {
  std::fprintf(stderr, "%s:%d: check failed: %s%s%s\n", file, line, expr, message ? ": " : "",
               message ? message : "");
  std::fflush(stderr);
  std::abort();
}

}  // namespace tandem::detail
