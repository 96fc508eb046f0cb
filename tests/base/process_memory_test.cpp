// Tests of process_memory: the three lines of a /proc/<pid>/status text, errors naming the line,
// and this process's own figures.
#include "base/process_memory.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace tandem {
namespace {

constexpr std::string_view kStatus =
    "Name:\ttandemd\n"
    "VmPeak:\t 5371672 kB\n"
    "VmHWM:\t 3014820 kB\n"
    "VmRSS:\t 2704648 kB\n"
    "RssAnon:\t 2678080 kB\n"
    "RssFile:\t   26568 kB\n"
    "RssShmem:\t       0 kB\n"
    "Threads:\t4\n";

TEST_CASE("parse_process_status reads VmRSS, VmHWM, RssAnon and RssFile in bytes", "[base]") {
  const Result<ProcessMemory> m = parse_process_status(kStatus);
  REQUIRE(m.ok());
  CHECK(m->resident_bytes == 2704648ull * 1024);
  CHECK(m->peak_bytes == 3014820ull * 1024);
  CHECK(m->anonymous_bytes == 2678080ull * 1024);
  CHECK(m->file_bytes == 26568ull * 1024);
}

TEST_CASE("parse_process_status names the line it cannot read", "[base]") {
  const std::string status(kStatus);
  struct Bad {
    std::string text;
    std::string named;
  };
  const std::vector<Bad> bad = {
      {"", "VmRSS"},
      {status.substr(0, status.find("RssFile")), "RssFile"},
      {"VmRSS:\t 12 MB\nVmHWM:\t 12 kB\nRssAnon:\t 1 kB\nRssFile:\t 1 kB\n", "VmRSS"},
      {"VmRSS:\t 12 kB\nRssAnon:\t 1 kB\nRssFile:\t 1 kB\n", "VmHWM"},
      {"VmRSS:\t 12 kB\nVmHWM:\t 12 kB\nRssAnon:\t x kB\nRssFile:\t 1 kB\n", "RssAnon"},
      {"VmRSS:\t 12 kB\nVmHWM:\t 12 kB\nRssAnon:\t 1 kB\nRssFileX:\t 1 kB\n", "RssFile"},
      {"VmRSS:\t 99999999999999999999 kB\nVmHWM:\t 1 kB\nRssAnon:\t 1 kB\nRssFile:\t 1 kB\n",
       "VmRSS"},
  };
  for (const Bad& b : bad) {
    INFO(b.text);
    const Result<ProcessMemory> m = parse_process_status(b.text);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(m.status().message(), Catch::Contains("\"" + b.named + ":"));
  }
}

TEST_CASE("read_process_memory sees memory this process touches", "[base]") {
  const Result<ProcessMemory> before = read_process_memory();
  REQUIRE(before.ok());
  CHECK(before->resident_bytes > 0);
  CHECK(before->anonymous_bytes + before->file_bytes <= before->resident_bytes + (1u << 20));
  std::vector<char> touched(64u << 20, 1);
  const Result<ProcessMemory> after = read_process_memory();
  REQUIRE(after.ok());
  CHECK(after->anonymous_bytes >= before->anonymous_bytes + (60u << 20));
  CHECK(after->peak_bytes >= after->resident_bytes);
  CHECK(touched[12345] == 1);
}

}  // namespace
}  // namespace tandem
