// Tests of MappedFile: contents, slicing bounds and errors that name the path.
#include "engine/model/mapped_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

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

}  // namespace
}  // namespace tandem::model
