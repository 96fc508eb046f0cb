// Tests of release_copied_bytes: a file's mapped pages leave the process (read back unchanged),
// memory read into the process or on the heap keeps its contents, partial pages stay mapped.
// Whether a page is mapped is read from /proc/self/pagemap (bit 63: present).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/model/mapped_file.h"
#include "tests/model/page_residency.h"

namespace tandem::model {
namespace {

using testing::page_present;
using testing::pattern_byte;
using testing::pattern_file;
using testing::pattern_mismatches;

const size_t kPage = testing::page_size();

TEST_CASE("release_copied_bytes unmaps a file's whole pages, which read back unchanged",
          "[model]") {
  const size_t pages = 16;
  const std::string path = pattern_file(pages * kPage);
  {
    Result<MappedFile> f = MappedFile::open(path);
    REQUIRE(f.ok());
    const std::span<const uint8_t> bytes = f->bytes();
    REQUIRE(pattern_mismatches(bytes) == 0);
    for (size_t p = 0; p < pages; ++p) REQUIRE(page_present(bytes.data() + p * kPage));

    // From the middle of page 2 to the middle of page 12: pages 3..11 whole, 2 and 12 partial.
    release_copied_bytes(bytes.subspan(2 * kPage + 100, 10 * kPage));
    for (size_t p = 0; p < pages; ++p) {
      INFO("page " << p);
      CHECK(page_present(bytes.data() + p * kPage) == (p < 3 || p > 11));
    }
    CHECK(pattern_mismatches(bytes) == 0);
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
    CHECK(pattern_mismatches(f->bytes()) == 0);
  }
  std::remove(path.c_str());

  // A heap buffer.
  std::vector<uint8_t> heap(pages * kPage + 123);
  for (size_t i = 0; i < heap.size(); ++i) heap[i] = pattern_byte(i);
  release_copied_bytes(heap);
  CHECK(pattern_mismatches(heap) == 0);
}

}  // namespace
}  // namespace tandem::model
