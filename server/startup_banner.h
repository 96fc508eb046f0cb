// tandemd's startup banner: version, git revision, build options, CPU features and (in CUDA
// builds) the visible GPUs. Call from the main thread after configure_logging().
#pragma once

#include <string>
#include <vector>

namespace tandem::server {

// "tandemd 0.1.0 (git abc123)", "build: RelWithDebInfo, GNU 12.2.0, CUDA off, sanitizer none",
// "cpu: avx2 fma ...". No GPU query here.
std::vector<std::string> build_banner_lines();

// Logs build_banner_lines() at info, then, when tandemd was built with CUDA, one line per
// visible device; a failure to list devices is logged as a warning and is not fatal.
void log_startup_banner();

}  // namespace tandem::server
