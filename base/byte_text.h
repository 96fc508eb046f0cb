// format_bytes: a byte count as people read it in logs and error messages.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

// Binary units with one decimal: 512 -> "512 B", 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB".
// Pure; any thread.
std::string format_bytes(uint64_t bytes);

}  // namespace tandem
