// process_memory: this process's resident memory as the kernel counts it (/proc/self/status), for
// the start-up log and the metrics.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/result.h"

namespace tandem {

struct ProcessMemory {
  uint64_t resident_bytes = 0;   // VmRSS
  uint64_t peak_bytes = 0;       // VmHWM: the most resident so far
  uint64_t anonymous_bytes = 0;  // RssAnon: the process's own memory (heap, repacked weights)
  uint64_t file_bytes = 0;       // RssFile: mapped file pages (a checkpoint's mapping)
};

// Parses the text of a /proc/<pid>/status file. INVALID_ARGUMENT naming the first of VmRSS,
// VmHWM, RssAnon, RssFile that is missing or not "<number> kB".
Result<ProcessMemory> parse_process_status(std::string_view status);

// This process's figures; UNAVAILABLE where /proc/self/status cannot be read (not Linux).
Result<ProcessMemory> read_process_memory();

}  // namespace tandem
