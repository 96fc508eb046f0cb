// Tests of MappedFile: contents, slicing bounds and errors that name the path.
#include "engine/model/mapped_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tandem::model {
namespace {

std::string temp_file(const std::string& content) {
  char name[] = "/tmp/tandem_mapped_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  close(fd);
  return name;
}

TEST_CASE("MappedFile maps the file's bytes", "[model]") {
  const std::string path = temp_file("hello tandem");
  {
    Result<MappedFile> f = MappedFile::open(path);
    REQUIRE(f.ok());
    CHECK(f->size() == 12);
    CHECK(std::string(reinterpret_cast<const char*>(f->bytes().data()), 5) == "hello");
    const auto s = f->slice(6, 6);
    REQUIRE(s.ok());
    CHECK(std::string(reinterpret_cast<const char*>(s->data()), s->size()) == "tandem");
    CHECK(f->slice(12, 0).ok());
  }
  std::remove(path.c_str());
}

TEST_CASE("MappedFile::slice refuses ranges outside the file, overflow included", "[model]") {
  const std::string path = temp_file("0123456789");
  Result<MappedFile> f = MappedFile::open(path);
  REQUIRE(f.ok());
  CHECK(f->slice(5, 6).status().code() == StatusCode::kOutOfRange);
  CHECK(f->slice(11, 0).status().code() == StatusCode::kOutOfRange);
  const auto wrap = f->slice(2, UINT64_MAX);
  REQUIRE_FALSE(wrap.ok());
  CHECK_THAT(wrap.status().message(), Catch::Contains(path));
  std::remove(path.c_str());
}

TEST_CASE("MappedFile::open errors name the path", "[model]") {
  const auto missing = MappedFile::open("/nonexistent/tandem/model.gguf");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  CHECK_THAT(missing.status().message(), Catch::Contains("/nonexistent/tandem/model.gguf"));
  const auto dir = MappedFile::open("/tmp");
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("an empty file maps to an empty span", "[model]") {
  const std::string path = temp_file("");
  Result<MappedFile> f = MappedFile::open(path);
  REQUIRE(f.ok());
  CHECK(f->size() == 0);
  CHECK(f->slice(0, 0).ok());
  CHECK_FALSE(f->slice(0, 1).ok());
  std::remove(path.c_str());
}

// Rewrites the first bytes of `path` in place (as `dd conv=notrunc` does) and moves its
// modification time one second on, so that the change does not depend on the clock's grain.
void rewrite_in_place(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  const timespec times[2] = {st.st_atim, {st.st_mtim.tv_sec + 1, st.st_mtim.tv_nsec}};
  REQUIRE(::futimens(fd, times) == 0);
  ::close(fd);
}

TEST_CASE("check_unchanged sees a file truncated, grown or rewritten in place", "[model]") {
  const std::string path = temp_file(std::string(10000, 'w'));
  Result<MappedFile> f = MappedFile::open(path);
  REQUIRE(f.ok());
  CHECK(f->check_unchanged().ok());
  SECTION("truncated") {
    REQUIRE(::truncate(path.c_str(), 1000) == 0);
    const Status st = f->check_unchanged();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK_THAT(st.message(), Catch::Contains(path + " changed on disk while being served") &&
                                 Catch::Contains("from 10000 to 1000 bytes") &&
                                 Catch::Contains("model.load_mode: read"));
  }
  SECTION("rewritten in place") {
    rewrite_in_place(path, std::string(10, 'x'));
    CHECK_THAT(f->check_unchanged().message(), Catch::Contains("rewritten in place"));
  }
  SECTION("replaced by rename: the mapping keeps the old file, nothing changed for it") {
    const std::string other = temp_file("new");
    REQUIRE(std::rename(other.c_str(), path.c_str()) == 0);
    CHECK(f->check_unchanged().ok());
    CHECK(f->bytes()[0] == 'w');
  }
  std::remove(path.c_str());
}

TEST_CASE("a read past the end of a truncated mapping gives zeros, not SIGBUS", "[model]") {
  const long page = ::sysconf(_SC_PAGESIZE);
  const std::string path = temp_file(std::string(static_cast<size_t>(page) * 4, '\x7f'));
  Result<MappedFile> f = MappedFile::open(path);
  REQUIRE(f.ok());
  CHECK(f->bytes()[static_cast<size_t>(page) * 3] == 0x7f);  // resident before the truncation
  REQUIRE(::truncate(path.c_str(), 100) == 0);
  // Without the guard this read kills the process with SIGBUS.
  volatile const uint8_t* bytes = f->bytes().data();
  CHECK(bytes[static_cast<size_t>(page) * 3 + 5] == 0);
  const Status st = f->check_unchanged();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK_THAT(st.message(), Catch::Contains("a read went past its end"));
  std::remove(path.c_str());
}

TEST_CASE("load_into_memory keeps the bytes at their address, whatever the file does", "[model]") {
  const long page = ::sysconf(_SC_PAGESIZE);
  std::string content(static_cast<size_t>(page) * 3 + 17, 'a');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>('a' + i % 26);
  const std::string path = temp_file(content);
  Result<MappedFile> f = MappedFile::open(path);
  REQUIRE(f.ok());
  const uint8_t* before = f->bytes().data();
  CHECK_FALSE(f->in_memory());
  REQUIRE(f->load_into_memory().ok());
  CHECK(f->in_memory());
  CHECK(f->bytes().data() == before);
  CHECK(f->load_into_memory().ok());  // idempotent
  REQUIRE(::truncate(path.c_str(), 0) == 0);
  CHECK(f->check_unchanged().ok());
  CHECK(std::string(reinterpret_cast<const char*>(f->bytes().data()), f->size()) == content);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tandem::model
