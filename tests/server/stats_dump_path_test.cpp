// Tests of tandemd's start-up check of placement.stats_output_path: a missing directory, a
// directory in place of the file and an unwritable directory are refused, naming key and path.
#include "server/stats_dump_path.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace tandem::server {
namespace {

namespace fs = std::filesystem;

struct ScratchDir {
  fs::path path =
      fs::temp_directory_path() / ("tandem-stats-path-test-" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() {
    std::error_code ec;
    fs::permissions(path / "locked", fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
};

TEST_CASE("check_stats_output_path accepts no output and a file in a writable directory",
          "[server]") {
  ScratchDir dir;
  CHECK(check_stats_output_path("").ok());
  CHECK(check_stats_output_path((dir.path / "stats.json").string()).ok());
  std::ofstream((dir.path / "old.json").string()) << "{}";
  CHECK(check_stats_output_path((dir.path / "old.json").string()).ok());  // replaced by rename
}

TEST_CASE("check_stats_output_path refuses a missing directory, naming key and path", "[server]") {
  ScratchDir dir;
  const std::string missing = (dir.path / "no-such-dir" / "stats.json").string();
  const Status s = check_stats_output_path(missing);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::StartsWith("placement.stats_output_path '" + missing + "'") &&
                              Catch::Contains("no-such-dir") &&
                              Catch::Contains("could not be written at shutdown"));
}

TEST_CASE("check_stats_output_path refuses a directory and an unwritable directory", "[server]") {
  ScratchDir dir;
  fs::create_directories(dir.path / "sub");
  const Status is_dir = check_stats_output_path((dir.path / "sub").string());
  CHECK(is_dir.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(is_dir.message(), Catch::Contains("is a directory"));

  fs::create_directories(dir.path / "locked");
  fs::permissions(dir.path / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string locked = (dir.path / "locked" / "stats.json").string();
  if (::geteuid() == 0) {
    // root may write anywhere access() is asked about; the check passes like the write would.
    CHECK(check_stats_output_path(locked).ok());
  } else {
    const Status s = check_stats_output_path(locked);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("cannot create files in the directory") &&
                                Catch::Contains("Permission denied"));
  }
}

}  // namespace
}  // namespace tandem::server
