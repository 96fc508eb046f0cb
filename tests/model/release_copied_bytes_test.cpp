// Tests of release_copied_bytes: a file's mapped pages leave the process (read back unchanged),
// memory read into the process or on the heap keeps its contents (a file read into memory until
// its drop_released, which frees the pages and makes them unreadable), partial pages stay mapped.
// Whether a page is mapped is read from /proc/self/pagemap (bit 63: present).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
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

TEST_CASE("release_copied_spans releases the page two touching spans share", "[model]") {
  const size_t pages = 8;
  const std::string path = pattern_file(pages * kPage);
  {
    Result<MappedFile> f = MappedFile::open(path);
    REQUIRE(f.ok());
    const std::span<const uint8_t> bytes = f->bytes();
    REQUIRE(pattern_mismatches(bytes) == 0);
    // Two neighbours meeting in the middle of page 3, given in reverse order: alone each would
    // leave page 3 (partial in both); together pages 2, 3 and 4 go, 1 and 5 stay (partial).
    release_copied_spans({bytes.subspan(3 * kPage + kPage / 2, 2 * kPage - kPage / 2 + 10),
                          bytes.subspan(kPage + 10, 2 * kPage + kPage / 2 - 10)});
    for (size_t p = 0; p < pages; ++p) {
      INFO("page " << p);
      CHECK(page_present(bytes.data() + p * kPage) == (p < 2 || p > 4));
    }
    CHECK(pattern_mismatches(bytes) == 0);
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

TEST_CASE("a file read into memory frees the released pages at drop_released, unreadable after",
          "[model]") {
  const size_t pages = 16;
  const std::string path = pattern_file(pages * kPage);
  {
    Result<MappedFile> f = MappedFile::open(path);
    REQUIRE(f.ok());
    // Mapped from the file: release_copied_bytes drops the pages itself; nothing is left to drop.
    release_copied_bytes(f->bytes().subspan(kPage, 2 * kPage));
    CHECK(f->drop_released() == 0);

    REQUIRE(f->load_into_memory().ok());
    const std::span<const uint8_t> bytes = f->bytes();
    REQUIRE(pattern_mismatches(bytes) == 0);
    // Pages 3..5 (from the middle of page 2 to the start of page 6), 5..6 again (overlapping),
    // 9..10, page 12 from two neighbours that each hold only part of it, and a range inside page
    // 14 (nothing whole).
    release_copied_bytes(bytes.subspan(2 * kPage + 7, 4 * kPage - 7));
    release_copied_bytes(bytes.subspan(5 * kPage, 2 * kPage));
    release_copied_bytes(bytes.subspan(9 * kPage, 2 * kPage + 1));
    release_copied_bytes(bytes.subspan(12 * kPage - 10, kPage / 2 + 10));
    release_copied_bytes(bytes.subspan(12 * kPage + kPage / 2, kPage / 2 + 10));
    release_copied_bytes(bytes.subspan(14 * kPage + 1, kPage - 2));
    // Until the drop, every byte stays as read.
    CHECK(pattern_mismatches(bytes) == 0);
    for (size_t p = 0; p < pages; ++p) CHECK(page_present(bytes.data() + p * kPage));

    CHECK(f->drop_released() == 7 * kPage);  // pages 3-6, 9-10 and 12, each once
    for (size_t p = 0; p < pages; ++p) {
      INFO("page " << p);
      const bool dropped = (p >= 3 && p <= 6) || p == 9 || p == 10 || p == 12;
      CHECK(page_present(bytes.data() + p * kPage) == !dropped);
      CHECK(testing::page_permissions(bytes.data() + p * kPage) == (dropped ? "---p" : "r--p"));
      if (!dropped) CHECK(pattern_mismatches(bytes.subspan(p * kPage, kPage), p * kPage) == 0);
    }
    CHECK(f->drop_released() == 0);  // nothing new released
  }
  std::remove(path.c_str());
}

TEST_CASE("an OwnedCopy frees the released pages at drop_released, as a file read into memory",
          "[model]") {
  const size_t pages = 8;
  OwnedCopy moved_from(pages * kPage);
  REQUIRE(moved_from.size() == pages * kPage);
  for (size_t i = 0; i < moved_from.size(); ++i) moved_from.data()[i] = pattern_byte(i);
  OwnedCopy copy = std::move(moved_from);  // the registration follows the bytes
  CHECK(moved_from.data() == nullptr);
  CHECK(moved_from.drop_released() == 0);
  const std::span<const uint8_t> bytes = copy.bytes();
  release_copied_bytes(bytes.subspan(kPage + 1, 2 * kPage));          // page 2 whole
  release_copied_bytes(bytes.subspan(3 * kPage + 1, 2 * kPage - 1));  // touches it: page 3, 4
  CHECK(pattern_mismatches(bytes) == 0);                              // kept until the drop
  CHECK(copy.drop_released() == 3 * kPage);
  for (size_t p = 0; p < pages; ++p) {
    INFO("page " << p);
    const bool dropped = p >= 2 && p <= 4;
    CHECK(testing::page_permissions(bytes.data() + p * kPage) == (dropped ? "---p" : "rw-p"));
    if (!dropped) CHECK(pattern_mismatches(bytes.subspan(p * kPage, kPage), p * kPage) == 0);
  }
  CHECK(copy.drop_released() == 0);
  // Destroyed, it is no longer known: a new mapping at the same address starts clean.
  copy = OwnedCopy();
  OwnedCopy again(pages * kPage);
  CHECK(again.drop_released() == 0);
}

}  // namespace
}  // namespace tandem::model
