// TANDEM_CHECK: aborts with file:line for a broken invariant (a bug). Never use it on input.
#pragma once

namespace tandem::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* expr, const char* message);
}  // namespace tandem::detail

// Evaluated in every build type: an invariant that is worth stating is worth checking.
#define TANDEM_CHECK(cond)                                                \
  do {                                                                    \
    if (!(cond)) [[unlikely]]                                             \
      ::tandem::detail::check_failed(__FILE__, __LINE__, #cond, nullptr); \
  } while (0)

#define TANDEM_CHECK_MSG(cond, msg)                                     \
  do {                                                                  \
    if (!(cond)) [[unlikely]]                                           \
      ::tandem::detail::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
