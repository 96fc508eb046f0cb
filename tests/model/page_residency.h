// Test helpers for page residency: whether a page is mapped in this process (its page-table
// entry present, bit 63 of /proc/self/pagemap), and temp files of a known byte pattern.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

namespace tandem::testing {

inline size_t page_size() {
  return static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// Byte i of a pattern file: varied, so that a zero page or a shifted page would not match.
inline uint8_t pattern_byte(size_t i) {
  return static_cast<uint8_t>((i * 131 + i / 4096 * 7 + 3) & 0xff);
}

// A temp file of `size` pattern bytes; the caller removes it.
inline std::string pattern_file(size_t size) {
  char name[] = "/tmp/tandem_pages_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = pattern_byte(i);
  REQUIRE(write(fd, bytes.data(), size) == static_cast<ssize_t>(size));
  close(fd);
  return name;
}

// Reads every byte of `bytes`, the pattern from byte `first` on (mapping every page again), and
// counts those that differ from it.
inline size_t pattern_mismatches(std::span<const uint8_t> bytes, size_t first = 0) {
  size_t bad = 0;
  for (size_t i = 0; i < bytes.size(); ++i) bad += bytes[i] != pattern_byte(first + i);
  return bad;
}

// Whether the page holding p is mapped in this process.
inline bool page_present(const void* p) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  REQUIRE(fd >= 0);
  uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / page_size() * sizeof(entry));
  const ssize_t n = ::pread(fd, &entry, sizeof(entry), at);
  ::close(fd);
  REQUIRE(n == static_cast<ssize_t>(sizeof(entry)));
  return (entry >> 63) != 0;
}

// The permissions of the mapping holding p as /proc/self/maps writes them ("r--p", "---p", ...),
// or "" when no mapping holds it.
inline std::string page_permissions(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    unsigned long long begin = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &begin, &end, perms) != 3) continue;
    if (at >= begin && at < end) return perms;
  }
  return "";
}

}  // namespace tandem::testing
