// process_memory: /proc/self/status read and its three memory lines parsed.
#include "base/process_memory.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace tandem {
namespace {

// The value of the line "<key>:<spaces><number> kB", in bytes.
Result<uint64_t> field_bytes(std::string_view status, std::string_view key) {
  size_t at = 0;
  while (at < status.size()) {
    const size_t end = std::min(status.find('\n', at), status.size());
    std::string_view line = status.substr(at, end - at);
    at = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') {
      continue;
    }
    line.remove_prefix(key.size() + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    uint64_t kib = 0;
    const auto [rest, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || std::string_view(rest, line.data() + line.size() - rest) != " kB" ||
        kib > UINT64_MAX / 1024) {
      break;
    }
    return kib * 1024;
  }
  return invalid_argument_error("process status: no \"" + std::string(key) +
                                ": <number> kB\" line");
}

}  // namespace

Result<ProcessMemory> parse_process_status(std::string_view status) {
  ProcessMemory m;
  TANDEM_ASSIGN_OR_RETURN(m.resident_bytes, field_bytes(status, "VmRSS"));
  TANDEM_ASSIGN_OR_RETURN(m.peak_bytes, field_bytes(status, "VmHWM"));
  TANDEM_ASSIGN_OR_RETURN(m.anonymous_bytes, field_bytes(status, "RssAnon"));
  TANDEM_ASSIGN_OR_RETURN(m.file_bytes, field_bytes(status, "RssFile"));
  return m;
}

Result<ProcessMemory> read_process_memory() {
  std::ifstream in("/proc/self/status");
  if (!in) return unavailable_error("cannot read /proc/self/status");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_process_status(text.str());
}

}  // namespace tandem
