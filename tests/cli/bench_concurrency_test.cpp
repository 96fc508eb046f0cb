// Tests for `tandem bench --concurrency` on the tiny-moe GGUF: the table and the JSON report one
// row per concurrency level with the token counts the run implies, and bad lists are usage errors.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_concurrency.h"

namespace tandem::cli {
namespace {

const std::string kModel = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/tiny-moe-f32.gguf";

struct Run {
  int rc = -1;
  std::string out;
  std::string err;
};

Run bench(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  Run r;
  r.rc = bench_concurrency_main(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_CASE("bench --concurrency 1,2 prints one table row per level", "[cli][bench]") {
  const Run r = bench({"--model", kModel, "--concurrency", "1,2", "--prompt-tokens", "8",
                       "--gen-tokens", "5", "--threads", "1"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);  // header, column names, 2 rows, ratio note
  CHECK(lines[0].find("1 threads") != std::string::npos);
  CHECK(lines[1].find("decode_tok/s") != std::string::npos);
  for (int i = 0; i < 2; ++i) {
    std::istringstream row(lines[2 + static_cast<size_t>(i)]);
    int n = 0;
    long long prompt = 0, decode = 0, steps = 0;
    double prefill_s = 0, decode_s = 0, tps = 0, per_seq = 0, ratio = 0;
    double cpu_s = 0, tps_cpu = 0, cpu_ratio = 0;
    row >> n >> prompt >> decode >> steps >> prefill_s >> decode_s >> tps >> per_seq >> ratio >>
        cpu_s >> tps_cpu >> cpu_ratio;
    REQUIRE_FALSE(row.fail());
    std::string rest;
    row >> rest;
    CHECK(rest.empty());
    const int expect_n = i + 1;
    CHECK(n == expect_n);
    CHECK(prompt == 8 * expect_n);
    CHECK(decode == 4 * expect_n);  // the first of 5 tokens comes from the prefill pass
    CHECK(steps == 5);              // one prefill pass, then 4 decode passes for the whole batch
    CHECK(prefill_s > 0);
    CHECK(decode_s > 0);
    CHECK(tps > 0);
    CHECK(per_seq == Approx(tps / expect_n).epsilon(0.01));
    CHECK(ratio > 0);
    CHECK(cpu_s > 0);
    CHECK(tps_cpu > 0);
    CHECK(cpu_ratio > 0);
  }
}

TEST_CASE("bench --concurrency --json reports the same figures as JSON", "[cli][bench]") {
  const Run r = bench({"--model", kModel, "--concurrency=3,1", "--prompt-tokens", "4",
                       "--gen-tokens", "3", "--threads", "1", "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("threads") == 1);
  const auto& rows = j.at("rows");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].at("concurrency") == 3);
  CHECK(rows[1].at("concurrency") == 1);
  CHECK(rows[0].at("completion_tokens") == 9);
  CHECK(rows[0].at("decode_tokens") == 6);
  CHECK(rows[1].at("completion_tokens") == 3);
  CHECK(rows[0].at("ratio").get<double>() == Approx(1.0));
  for (const auto& row : rows) {
    CHECK(row.at("steps") == 3);
    CHECK(row.at("single_prefill_step") == true);
    CHECK(row.at("decode_tokens_per_s").get<double>() > 0);
    CHECK(row.at("per_sequence_tokens_per_s").get<double>() > 0);
    CHECK(row.at("decode_tokens_per_cpu_s").get<double>() > 0);
  }
}

TEST_CASE("bench --concurrency --profile splits the first pass from the decode passes",
          "[cli][bench]") {
  const Run r = bench({"--model", kModel, "--concurrency", "2", "--prompt-tokens", "4",
                       "--gen-tokens", "4", "--threads", "1", "--json", "--profile"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& row = j.at("rows").at(0);
  const auto& parts = row.at("pass_ms");
  CHECK(parts.at("decode_pass_count") == 3);  // 4 tokens: one from the prefill, 3 decode passes
  for (const char* pass : {"first_pass", "decode_passes"}) {
    INFO(pass);
    const auto& ms = parts.at(pass);
    for (const char* part : {"attention", "experts", "head"}) {
      INFO(part);
      CHECK(ms.at(part).get<double>() > 0.0);
    }
    CHECK_FALSE(ms.contains("dense ffn"));  // tiny-moe has no dense layer
  }
  const Run text = bench({"--model", kModel, "--concurrency", "1", "--prompt-tokens", "4",
                          "--gen-tokens", "3", "--threads", "1", "--profile"});
  REQUIRE(text.rc == 0);
  CHECK(text.out.find("concurrency 1, pass parts, first pass:") != std::string::npos);
  CHECK(text.out.find("(passes: 2, tokens a pass: 1.0)") != std::string::npos);
}

TEST_CASE("bench --concurrency rejects bad input with usage errors", "[cli][bench]") {
  for (const std::string list : {"0", "1,x", "", "4,,-1", "2000", "1.5"}) {
    const Run r = bench({"--model", kModel, "--concurrency", list});
    INFO(list << ": " << r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find("--concurrency") != std::string::npos);
  }
  CHECK(bench({"--model", kModel, "--concurrency", "1", "--gen-tokens", "1"}).rc == 2);
  CHECK(bench({"--model", "/nonexistent.gguf", "--concurrency", "1"}).rc == 2);
  CHECK(bench({"--concurrency", "1"}).rc == 2);
  const Run help = bench({"--concurrency", "1", "--help"});
  CHECK(help.rc == 0);
  CHECK(help.out.find("usage: tandem bench") != std::string::npos);
}

TEST_CASE("parse_concurrency_list", "[cli][bench]") {
  CHECK(parse_concurrency_list("1,4,16").value() == std::vector<int>{1, 4, 16});
  CHECK(parse_concurrency_list("2 8").value() == std::vector<int>{2, 8});
  CHECK_FALSE(parse_concurrency_list("16,").value().empty());
  CHECK_FALSE(parse_concurrency_list("1;4").ok());
  CHECK_FALSE(parse_concurrency_list(",").ok());
}

}  // namespace
}  // namespace tandem::cli
