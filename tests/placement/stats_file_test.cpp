// Tests of the statistics file format and plain tables: round trip and every rejection.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "engine/placement/stats_file.h"

namespace tandem::placement {
namespace {

using nlohmann::json;

ModelIdentity identity() {
  ModelIdentity m;
  m.architecture = "olmoe";
  m.n_layers = 3;
  m.n_experts = 4;
  m.n_experts_used = 2;
  m.hidden_size = 64;
  m.moe_layers = {true, false, true};
  m.fingerprint = "fnv1a64:00000000deadbeef";
  return m;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tandem_placement_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A valid file as a person would write it from docs/placement.md.
const char* kValid = R"({
  "format": "tandem.activation_stats",
  "version": 1,
  "model": {"architecture": "olmoe", "n_layers": 3, "n_experts": 4, "n_experts_used": 2,
            "hidden_size": 64, "fingerprint": "fnv1a64:00000000deadbeef"},
  "moe_layers": [0, 2],
  "tokens": 5,
  "counts": [[1, 2, 3, 4], [0, 0, 10, 0]]
})";

Status parse_error(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  Result<ActivationStats> s = stats_from_json(j);
  REQUIRE_FALSE(s.ok());
  return s.status();
}

std::string with(const std::string& from, const std::string& to) {
  std::string s = kValid;
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

TEST_CASE("stats file: the documented example parses", "[placement]") {
  Result<ActivationStats> s = stats_from_json(json::parse(kValid));
  REQUIRE(s.ok());
  CHECK(s->model().architecture == "olmoe");
  CHECK(s->moe_layer_ids() == std::vector<uint32_t>{0, 2});
  CHECK(s->tokens() == 5);
  CHECK(s->count(0, 3) == 4);
  CHECK(s->count(1, 2) == 10);
  CHECK(check_same_model(s->model(), identity()).ok());
}

TEST_CASE("stats file: save and load round trip, merge of two files", "[placement]") {
  ActivationStats a = ActivationStats::create(identity()).value();
  a.add(0, 0, 7);
  a.add(1, 3, uint64_t{1} << 60);  // beyond double precision: must survive exactly
  a.add_tokens(123);
  const std::string path = temp_path("round_trip.json");
  REQUIRE(save_stats(a, path).ok());
  Result<ActivationStats> b = load_stats_for(path, identity());
  REQUIRE(b.ok());
  CHECK(stats_to_json(*b) == stats_to_json(a));
  CHECK(b->count(1, 3) == uint64_t{1} << 60);
  REQUIRE(b->merge(a).ok());
  CHECK(b->count(0, 0) == 14);
  CHECK(b->tokens() == 246);
  // The file is one object with the documented keys.
  std::ifstream in(path);
  const json j = json::parse(in);
  CHECK(j["format"] == "tandem.activation_stats");
  CHECK(j["version"] == 1);
  CHECK(j["counts"].size() == 2);
  std::filesystem::remove(path);
}

TEST_CASE("stats file: saving into a missing directory says so", "[placement]") {
  const ActivationStats a = ActivationStats::create(identity()).value();
  const std::string path = temp_path("no_such_dir") + "/stats.json";
  const Status s = save_stats(a, path);
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK_THAT(s.message(), Catch::Contains(path + ".tmp-") &&
                              Catch::Contains("cannot be created: No such file or directory"));
}

TEST_CASE("stats file: a file for another model names the differing field", "[placement]") {
  const std::string path = temp_path("other.json");
  write(path, kValid);
  ModelIdentity m = identity();
  m.n_experts = 8;
  m.hidden_size = 128;
  Result<ActivationStats> s = load_stats_for(path, m);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.status().message(), Catch::Contains(path));
  CHECK_THAT(s.status().message(), Catch::Contains("n_experts is 4 in the file, 8 in the model"));
  CHECK_THAT(s.status().message(),
             Catch::Contains("hidden_size is 64 in the file, 128 in the model"));
  m = identity();
  m.fingerprint = "fnv1a64:1111111111111111";
  CHECK_THAT(load_stats_for(path, m).status().message(), Catch::Contains("fingerprint is"));
  m = identity();
  m.architecture = "mixtral";
  CHECK_THAT(load_stats_for(path, m).status().message(),
             Catch::Contains("architecture is olmoe in the file, mixtral in the model"));
  m = identity();
  m.moe_layers = {true, true, true};
  CHECK_THAT(load_stats_for(path, m).status().message(),
             Catch::Contains("moe_layers is [0,2] in the file, [0,1,2] in the model"));
  std::filesystem::remove(path);
}

TEST_CASE("stats file: bad counts are refused with their position", "[placement]") {
  CHECK_THAT(parse_error(with("[0, 0, 10, 0]", "[0, -3, 10, 0]")).message(),
             Catch::Contains("counts[1][1]: -3 is negative"));
  CHECK_THAT(parse_error(with("[0, 0, 10, 0]", "[0, 0, 2.5, 0]")).message(),
             Catch::Contains("counts[1][2]: 2.5 is not an integer"));
  // JSON text cannot hold inf/NaN (nlohmann refuses 1e999 as malformed), but a json value can.
  json inf = json::parse(kValid);
  inf["counts"][1][2] = std::numeric_limits<double>::infinity();
  CHECK_THAT(stats_from_json(inf).status().message(),
             Catch::Contains("counts[1][2]: the value is not finite"));
  CHECK_FALSE(json::accept(with("[0, 0, 10, 0]", "[0, 0, 1e999, 0]")));
  CHECK_THAT(parse_error(with("[0, 0, 10, 0]", "[0, 0, \"10\", 0]")).message(),
             Catch::Contains("counts[1][2]: expected a non-negative integer"));
  CHECK_THAT(parse_error(with("[0, 0, 10, 0]", "[0, 0, -0.5, 0]")).message(),
             Catch::Contains("negative"));
  // An integral float is a count.
  CHECK(stats_from_json(json::parse(with("[0, 0, 10, 0]", "[0, 0, 10.0, 0]"))).ok());
}

TEST_CASE("stats file: wrong shapes are refused", "[placement]") {
  CHECK_THAT(parse_error(with("[0, 0, 10, 0]", "[0, 0, 10]")).message(),
             Catch::Contains("counts[1] has 3 entries, n_experts is 4"));
  CHECK_THAT(parse_error(with(", [0, 0, 10, 0]]", "]")).message(),
             Catch::Contains("counts has 1 rows, moe_layers 2"));
  CHECK_THAT(parse_error(with("\"moe_layers\": [0, 2]", "\"moe_layers\": [0, 3]")).message(),
             Catch::Contains("not below n_layers 3"));
  CHECK_THAT(parse_error(with("\"moe_layers\": [0, 2]", "\"moe_layers\": [2, 0]")).message(),
             Catch::Contains("strictly ascending"));
  CHECK_THAT(parse_error(with("\"moe_layers\": [0, 2]", "\"moe_layers\": []")).message(),
             Catch::Contains("no layer is an MoE layer"));
}

TEST_CASE("stats file: format, version and fields are checked", "[placement]") {
  CHECK_THAT(parse_error(with("tandem.activation_stats", "other.stats")).message(),
             Catch::Contains("format is \"other.stats\""));
  const Status newer = parse_error(with("\"version\": 1", "\"version\": 2"));
  CHECK(newer.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(newer.message(),
             Catch::Contains("version 2 is newer than this build reads (up to 1)"));
  CHECK_THAT(parse_error(with("\"version\": 1", "\"version\": 0")).message(),
             Catch::Contains("version 0"));
  CHECK_THAT(parse_error(with("\"tokens\": 5,", "")).message(),
             Catch::Contains("missing field \"tokens\""));
  CHECK_THAT(parse_error(with("\"architecture\": \"olmoe\"", "\"architecture\": 3")).message(),
             Catch::Contains("model.architecture: expected a string"));
  CHECK_THAT(parse_error("[1]").message(), Catch::Contains("must be a JSON object"));
}

TEST_CASE("stats file: unreadable and malformed files", "[placement]") {
  CHECK(load_stats(temp_path("does_not_exist.json")).status().code() == StatusCode::kNotFound);
  const std::string path = temp_path("malformed.json");
  write(path, "{\"format\": \"tandem.activation_stats\", ");
  CHECK_THAT(load_stats(path).status().message(), Catch::Contains("malformed JSON"));
  CHECK_THAT(read_stats_input(path).status().message(), Catch::Contains("malformed JSON"));
  std::filesystem::remove(path);
}

TEST_CASE("plain tables: JSON array of arrays and CSV", "[placement]") {
  Result<ExpertTable> t =
      table_from_json(json::parse("[[0.1, 0.5, 0.3, 0.8], [0.2, 0.4, 0.9, 0.1]]"));
  REQUIRE(t.ok());
  CHECK(t->layers == std::vector<uint32_t>{0, 1});
  CHECK(t->n_experts == 4);
  CHECK(t->at(1, 2) == 0.9);
  Result<ExpertTable> c =
      table_from_csv("# from another tool\n0.1,0.5, 0.3,0.8\r\n\n0.2,0.4,0.9,0.1\n");
  REQUIRE(c.ok());
  CHECK(c->values == t->values);
  CHECK(c->layers == t->layers);

  CHECK_THAT(table_from_json(json::parse("[[1, 2], [3]]")).status().message(),
             Catch::Contains("row 1 has 1 columns, row 0 has 2"));
  CHECK_THAT(table_from_json(json::parse("[[1, -2]]")).status().message(),
             Catch::Contains("row 0, column 1: -2 is negative"));
  CHECK_THAT(table_from_json(json::parse("[[1, null]]")).status().message(),
             Catch::Contains("expected a number"));
  json nan_table = json::parse("[[1, 2]]");
  nan_table[0][1] = std::numeric_limits<double>::quiet_NaN();
  CHECK_THAT(table_from_json(nan_table).status().message(), Catch::Contains("not finite"));
  CHECK_FALSE(table_from_json(json::parse("[]")).ok());
  CHECK_FALSE(table_from_json(json::parse("[[]]")).ok());
  CHECK_THAT(table_from_csv("1,2\n3,x\n").status().message(),
             Catch::Contains("line 2, column 1: \"x\" is not a number"));
  CHECK_THAT(table_from_csv("1,2\n3\n").status().message(),
             Catch::Contains("line 2 has 1 columns, the first row has 2"));
  CHECK_THAT(table_from_csv("1,-2\n").status().message(), Catch::Contains("negative"));
  CHECK_THAT(table_from_csv("1,inf\n").status().message(), Catch::Contains("not finite"));
  CHECK_THAT(table_from_csv("1,nan\n").status().message(), Catch::Contains("not finite"));
  CHECK_FALSE(table_from_csv("1,,2\n").ok());
  CHECK_FALSE(table_from_csv("# only a comment\n").ok());
}

TEST_CASE("read_stats_input detects the kind; conform_to_model fits plain tables", "[placement]") {
  const std::string tandem_path = temp_path("in.json");
  const std::string json_path = temp_path("in_table.json");
  const std::string csv_path = temp_path("in.csv");
  write(tandem_path, kValid);
  write(json_path, " [[1, 2, 3, 4], [0, 0, 0, 0], [5, 6, 7, 8]]");
  write(csv_path, "1,2,3,4\n5,6,7,8\n");
  Result<StatsInput> a = read_stats_input(tandem_path);
  Result<StatsInput> b = read_stats_input(json_path);
  Result<StatsInput> c = read_stats_input(csv_path);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  CHECK(a->kind == "tandem");
  CHECK(a->table.layers == std::vector<uint32_t>{0, 2});
  CHECK(b->kind == "json-table");
  CHECK(c->kind == "csv-table");

  // One row per layer: the dense row 1 is dropped.
  Result<ExpertTable> fb = conform_to_model(*b, identity());
  REQUIRE(fb.ok());
  CHECK(fb->layers == std::vector<uint32_t>{0, 2});
  CHECK(fb->values == std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8});
  // One row per MoE layer: relabelled.
  Result<ExpertTable> fc = conform_to_model(*c, identity());
  REQUIRE(fc.ok());
  CHECK(fc->layers == std::vector<uint32_t>{0, 2});
  // A Tandem file must be for this model.
  CHECK(conform_to_model(*a, identity()).ok());
  ModelIdentity other = identity();
  other.n_experts_used = 1;
  CHECK_THAT(conform_to_model(*a, other).status().message(),
             Catch::Contains("n_experts_used is 2 in the file, 1 in the model"));
  // Plain tables of the wrong shape.
  write(csv_path, "1,2,3\n");
  CHECK_THAT(conform_to_model(read_stats_input(csv_path).value(), identity()).status().message(),
             Catch::Contains("3 columns, the model has 4 experts"));
  write(csv_path, "1,2,3,4\n1,2,3,4\n1,2,3,4\n1,2,3,4\n");
  CHECK_THAT(conform_to_model(read_stats_input(csv_path).value(), identity()).status().message(),
             Catch::Contains("4 rows, the model has 2 MoE layers (3 layers)"));
  for (const std::string& p : {tandem_path, json_path, csv_path}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace tandem::placement
