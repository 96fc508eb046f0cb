// Tests for StopConditions: stop strings across tokens with hold-back, stop ids, EOS, limits.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/runtime/stop_conditions.h"

namespace tandem::runtime {
namespace {

constexpr int32_t kEos = 2;
constexpr int64_t kContext = 1000;

struct Run {
  std::vector<std::string> chunks;  // text released per fed token
  std::string text;                 // all released text
  StopDecision last;
  int fed = 0;
};

// Feeds pieces as tokens 100, 101, ... until the output finishes.
Run feed_all(StopConditions& stop, const std::vector<std::string>& pieces) {
  Run run;
  for (size_t i = 0; i < pieces.size() && !stop.finished(); ++i) {
    run.last = stop.feed(static_cast<int32_t>(100 + i), pieces[i]);
    run.chunks.push_back(run.last.text);
    run.text += run.last.text;
    ++run.fed;
  }
  return run;
}

SamplingParams with_stops(std::vector<std::string> stops) {
  SamplingParams params;
  params.stop = std::move(stops);
  return params;
}

TEST_CASE("a stop string spanning tokens ends the output before it", "[stop]") {
  StopConditions stop(with_stops({"END"}), {kEos}, 10, kContext);
  Run run = feed_all(stop, {"Hello E", "N", "D and more"});
  REQUIRE(run.chunks.size() == 3);
  CHECK(run.chunks[0] == "Hello ");  // "E" held back: it may start "END"
  CHECK(run.chunks[1].empty());      // "EN" held back
  CHECK(run.chunks[2].empty());
  CHECK(run.text == "Hello ");
  CHECK(run.last.finished);
  CHECK(run.last.reason == FinishReason::kStop);
  REQUIRE(run.last.matched_stop_string.has_value());
  CHECK(*run.last.matched_stop_string == "END");
  CHECK_FALSE(run.last.matched_token_id.has_value());
}

TEST_CASE("held-back text is released once it cannot start a stop string", "[stop]") {
  StopConditions stop(with_stops({"abc"}), {kEos}, 10, kContext);
  StopDecision d1 = stop.feed(100, "xa");
  CHECK(d1.text == "x");
  CHECK(stop.held_back_bytes() == 1);
  StopDecision d2 = stop.feed(101, "b");
  CHECK(d2.text.empty());
  CHECK(stop.held_back_bytes() == 2);
  StopDecision d3 = stop.feed(102, "d");
  CHECK(d3.text == "abd");
  CHECK(stop.held_back_bytes() == 0);
  CHECK_FALSE(d3.finished);
}

TEST_CASE("no chunk ever shows a partial stop string, however the text is split", "[stop]") {
  const std::string full = "The answer is 42.<|end|> trailing";
  const std::string expected = "The answer is 42.";
  for (size_t width = 1; width <= 5; ++width) {
    for (size_t offset = 0; offset < width; ++offset) {
      std::vector<std::string> pieces;
      if (offset > 0) pieces.push_back(full.substr(0, offset));
      for (size_t at = offset; at < full.size(); at += width)
        pieces.push_back(full.substr(at, width));
      StopConditions stop(with_stops({"<|end|>", "never"}), {kEos}, 10, kContext);
      Run run = feed_all(stop, pieces);
      INFO("width " << width << " offset " << offset);
      CHECK(run.text == expected);
      CHECK(run.last.finished);
      CHECK(run.last.matched_stop_string == std::optional<std::string>("<|end|>"));
      // The released prefix at every step is a prefix of the expected text: nothing of the stop
      // string leaked before the match was known.
      std::string so_far;
      for (const auto& chunk : run.chunks) {
        so_far += chunk;
        CHECK(expected.compare(0, so_far.size(), so_far) == 0);
      }
    }
  }
}

TEST_CASE("the earliest stop string wins; include_stop_str_in_output keeps it", "[stop]") {
  SamplingParams params = with_stops({"world", "lo w"});
  StopConditions stop(params, {kEos}, 10, kContext);
  Run run = feed_all(stop, {"hello world"});
  CHECK(run.text == "hel");
  CHECK(run.last.matched_stop_string == std::optional<std::string>("lo w"));

  params.include_stop_str_in_output = true;
  StopConditions keeping(params, {kEos}, 10, kContext);
  Run kept = feed_all(keeping, {"hel", "lo wo", "rld"});
  CHECK(kept.text == "hello w");
  CHECK(kept.last.finished);
}

TEST_CASE("EOS ends with stop and drops its text; held text is released", "[stop]") {
  StopConditions stop(with_stops({"xyz"}), {kEos}, 10, kContext);
  CHECK(stop.feed(100, "ab x").text == "ab ");
  StopDecision d = stop.feed(kEos, "</s>");
  CHECK(d.finished);
  CHECK(d.reason == FinishReason::kStop);
  CHECK(d.matched_token_id == std::optional<int32_t>(kEos));
  CHECK(d.text == "x");
  CHECK(stop.output_tokens() == 2);
  // Fed after the end: nothing changes.
  StopDecision after = stop.feed(100, "more");
  CHECK(after.finished);
  CHECK(after.text.empty());
  CHECK(stop.output_tokens() == 2);
}

TEST_CASE("ignore_eos treats EOS as text; stop token ids still stop", "[stop]") {
  SamplingParams params;
  params.ignore_eos = true;
  params.stop_token_ids = {7};
  StopConditions stop(params, {kEos}, 10, kContext);
  StopDecision d1 = stop.feed(kEos, "</s>");
  CHECK_FALSE(d1.finished);
  CHECK(d1.text == "</s>");
  StopDecision d2 = stop.feed(7, "<stop>");
  CHECK(d2.finished);
  CHECK(d2.reason == FinishReason::kStop);
  CHECK(d2.matched_token_id == std::optional<int32_t>(7));
  CHECK(d2.text.empty());

  params.include_stop_str_in_output = true;
  StopConditions keeping(params, {kEos}, 10, kContext);
  CHECK(keeping.feed(7, "<stop>").text == "<stop>");
}

TEST_CASE("max_tokens and the context limit end with length", "[stop]") {
  SamplingParams params = with_stops({"zz"});
  params.max_tokens = 3;
  StopConditions stop(params, {kEos}, 10, kContext);
  CHECK_FALSE(stop.feed(100, "a").finished);
  CHECK_FALSE(stop.feed(101, "b").finished);
  StopDecision last = stop.feed(102, "cz");
  CHECK(last.finished);
  CHECK(last.reason == FinishReason::kLength);
  CHECK(last.text == "cz");  // the held "z" is released at the end
  CHECK_FALSE(last.matched_stop_string.has_value());
  CHECK_FALSE(last.matched_token_id.has_value());

  StopConditions context(SamplingParams{}, {kEos}, 998, kContext);  // room for two tokens
  CHECK_FALSE(context.feed(100, "a").finished);
  StopDecision full = context.feed(101, "b");
  CHECK(full.finished);
  CHECK(full.reason == FinishReason::kLength);

  // A stop on the last allowed token is a stop, not length.
  params.max_tokens = 1;
  StopConditions both(params, {kEos}, 10, kContext);
  StopDecision eos = both.feed(kEos, "");
  CHECK(eos.reason == FinishReason::kStop);
}

TEST_CASE("min_tokens delays EOS, stop ids and stop strings", "[stop]") {
  SamplingParams params = with_stops({"!"});
  params.min_tokens = 3;
  params.stop_token_ids = {9};
  StopConditions stop(params, {kEos}, 10, kContext);
  StopDecision d1 = stop.feed(kEos, "E");
  CHECK_FALSE(d1.finished);
  CHECK(d1.text == "E");
  StopDecision d2 = stop.feed(100, "hi!");
  CHECK_FALSE(d2.finished);
  CHECK(d2.text == "hi!");
  StopDecision d3 = stop.feed(101, "ok!x");
  CHECK(d3.finished);
  CHECK(d3.text == "ok");
  CHECK(d3.matched_stop_string == std::optional<std::string>("!"));
}

TEST_CASE("abort ends with abort and releases held text", "[stop]") {
  StopConditions stop(with_stops({"STOP"}), {kEos}, 10, kContext);
  CHECK(stop.feed(100, "go ST").text == "go ");
  StopDecision d = stop.abort();
  CHECK(d.finished);
  CHECK(d.reason == FinishReason::kAbort);
  CHECK(d.text == "ST");
  CHECK(stop.finished());
  CHECK(stop.abort().text.empty());
}

}  // namespace
}  // namespace tandem::runtime
