// Tests of release_copied_bytes: a file's mapped pages leave the process (read back unchanged),
// memory read into the process or on the heap keeps its contents, partial pages stay mapped.
// Whether a page is mapped is read from /proc/self/pagemap (bit 63: present).
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/model/mapped_file.h"

namespace tandem::model {
namespace {

const size_t kPage = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

// Byte i of the test file: varied, so that a zero page or a shifted page would not match.
uint8_t pattern(size_t i) {
  return static_cast<uint8_t>((i * 131 + i / 4096 * 7 + 3) & 0xff);
}

std::string pattern_file(size_t size) {
  char name[] = "/tmp/tandem_release_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = pattern(i);
  REQUIRE(write(fd, bytes.data(), size) == static_cast<ssize_t>(size));
  close(fd);
  return name;
}

// Whether the page holding p is mapped in this process (its page-table entry present).
bool page_present(const void* p) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY);
  REQUIRE(fd >= 0);
  uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<uintptr_t>(p) / kPage * sizeof(entry));
  const ssize_t n = ::pread(fd, &entry, sizeof(entry), at);
  ::close(fd);
  REQUIRE(n == static_cast<ssize_t>(sizeof(entry)));
  return (entry >> 63) != 0;
}

// Reads every byte (mapping every page) and counts those that differ from the pattern.
size_t mismatches(std::span<const uint8_t> bytes) {
  size_t bad = 0;
  for (size_t i = 0; i < bytes.size(); ++i) bad += bytes[i] != pattern(i);
  return bad;
}

TEST_CASE("release_copied_bytes unmaps a file's whole pages, which read back unchanged",
          "[model]") {
  const size_t pages = 16;
  const std::string path = pattern_file(pages * kPage);
  {
    Result<MappedFile> f = MappedFile::open(path);
    REQUIRE(f.ok());
    const std::span<const uint8_t> bytes = f->bytes();
    REQUIRE(mismatches(bytes) == 0);
    for (size_t p = 0; p < pages; ++p) REQUIRE(page_present(bytes.data() + p * kPage));

    // From the middle of page 2 to the middle of page 12: pages 3..11 whole, 2 and 12 partial.
    release_copied_bytes(bytes.subspan(2 * kPage + 100, 10 * kPage));
    for (size_t p = 0; p < pages; ++p) {
      INFO("page " << p);
      CHECK(page_present(bytes.data() + p * kPage) == (p < 3 || p > 11));
    }
    CHECK(mismatches(bytes) == 0);
    CHECK(page_present(bytes.data() + 5 * kPage));  // read again: mapped again

    // A range inside one page releases nothing.
    release_copied_bytes(bytes.subspan(7 * kPage + 1, kPage - 2));
    CHECK(page_present(bytes.data() + 7 * kPage));
    release_copied_bytes({});
  }
  std::remove(path.c_str());
}

TEST_CASE("release_copied_bytes keeps the contents of memory that is not a file's mapping",
          "[model]") {
  const size_t pages = 8;
  const std::string path = pattern_file(pages * kPage);
  {
    // A file read into memory: anonymous pages, which MADV_DONTNEED would turn into zeros.
    Result<MappedFile> f = MappedFile::open(path);
    REQUIRE(f.ok());
    REQUIRE(f->load_into_memory().ok());
    release_copied_bytes(f->bytes());
    CHECK(mismatches(f->bytes()) == 0);
  }
  std::remove(path.c_str());

  // A heap buffer.
  std::vector<uint8_t> heap(pages * kPage + 123);
  for (size_t i = 0; i < heap.size(); ++i) heap[i] = pattern(i);
  release_copied_bytes(heap);
  CHECK(mismatches(heap) == 0);
}

}  // namespace
}  // namespace tandem::model
