// Tests of replace_file and create_fresh_directory: planted names are replaced, never followed
// or reused, and failures carry the right code.
#include "base/file_replace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh scratch directory per test, removed at the end.
struct Scratch {
  fs::path dir;
  Scratch() {
    Result<std::string> made =
        create_fresh_directory(fs::temp_directory_path().string(), "tandem-file-replace-test-");
    REQUIRE(made.ok());
    dir = made.value();
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

TEST_CASE("replace_file writes a new file and replaces an old one", "[base]") {
  Scratch s;
  const fs::path path = s.dir / "out.json";
  REQUIRE(replace_file(path.string(), "first").ok());
  CHECK(read_text(path) == "first");
  REQUIRE(replace_file(path.string(), "second, longer").ok());
  CHECK(read_text(path) == "second, longer");
  // No temporary sibling is left behind.
  CHECK(std::distance(fs::directory_iterator(s.dir), fs::directory_iterator()) == 1);
}

TEST_CASE("replace_file replaces a planted symlink instead of writing through it", "[base]") {
  Scratch s;
  const fs::path victim = s.dir / "victim";
  { std::ofstream(victim) << "precious"; }
  const fs::path path = s.dir / "config.json";
  fs::create_symlink(victim, path);
  REQUIRE(replace_file(path.string(), "{}").ok());
  CHECK(read_text(victim) == "precious");
  CHECK_FALSE(fs::is_symlink(path));
  CHECK(read_text(path) == "{}");
}

TEST_CASE("replace_file names the path and codes a missing directory", "[base]") {
  Scratch s;
  const std::string path = (s.dir / "missing" / "out.json").string();
  const Status st = replace_file(path, "x");
  CHECK(st.code() == StatusCode::kNotFound);
  CHECK(st.message().find((s.dir / "missing").string()) != std::string::npos);
}

TEST_CASE("create_fresh_directory never reuses a directory", "[base]") {
  Scratch s;
  Result<std::string> a = create_fresh_directory(s.dir.string(), "tok-");
  Result<std::string> b = create_fresh_directory(s.dir.string(), "tok-");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a.value() != b.value());
  CHECK(fs::path(a.value()).parent_path() == s.dir);
  CHECK(fs::path(a.value()).filename().string().rfind("tok-", 0) == 0);
  struct stat info {};
  REQUIRE(::lstat(a.value().c_str(), &info) == 0);
  CHECK(S_ISDIR(info.st_mode));
  CHECK((info.st_mode & 0777) == 0755);
  CHECK(info.st_uid == ::getuid());
  const Status missing = create_fresh_directory((s.dir / "nope").string(), "tok-").status();
  CHECK(missing.code() == StatusCode::kNotFound);
}

TEST_CASE("OwnedDirectory removes its directory, once, when its last owner ends", "[base]") {
  Scratch s;
  const std::string dir = create_fresh_directory(s.dir.string(), "owned-").value();
  { std::ofstream(fs::path(dir) / "file") << "x"; }
  {
    OwnedDirectory first(dir);
    OwnedDirectory second = std::move(first);
    CHECK(first.path().empty());
    CHECK(second.path() == dir);
    CHECK(fs::exists(dir));
  }
  CHECK_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace tandem
