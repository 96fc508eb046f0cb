// Tests for `tandem generate` and `tandem tokenize` on the tiny-moe GGUF: greedy ids against
// llama.cpp's greedy continuation (ref-f32.json), seeded sampling, stop strings, max tokens, bad
// parameters, and the reference prompt ids.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/generate_command.h"
#include "cli/tokenize_command.h"

namespace tandem::cli {
namespace {

const std::string kTinyMoe = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/";
const std::string kModel = kTinyMoe + "tiny-moe-f32.gguf";

struct Run {
  int rc = -1;
  std::string out;
  std::string err;
};

Run generate(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  Run r;
  r.rc = generate_main(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

Run tokenize(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  Run r;
  r.rc = tokenize_main(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

nlohmann::json reference_prompt(const std::string& name) {
  std::ifstream in(kTinyMoe + "ref-f32.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto ref = nlohmann::json::parse(ss.str());
  for (const auto& p : ref.at("prompts")) {
    if (p.at("name") == name) return p;
  }
  FAIL("no prompt " << name << " in ref-f32.json");
  return {};
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

// Runs generate with --json on the fox prompt's ids plus `extra`; parses the object.
nlohmann::json generate_json(const std::vector<std::string>& extra) {
  const auto fox = reference_prompt("fox");
  std::vector<std::string> args = {"--model",
                                   kModel,
                                   "--prompt-ids",
                                   ids_text(fox.at("tokens").get<std::vector<int32_t>>()),
                                   "--json",
                                   "--threads",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const Run r = generate(args);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return nlohmann::json::parse(r.out);
}

TEST_CASE("generate: greedy ids match llama.cpp's greedy continuation", "[cli][generate]") {
  const auto fox = reference_prompt("fox");
  const auto greedy = fox.at("greedy_tokens").get<std::vector<int32_t>>();
  const int n = static_cast<int>(greedy.size());
  const auto j = generate_json({"--max-tokens", std::to_string(n), "--temperature", "0"});
  CHECK(j.at("token_ids").get<std::vector<int32_t>>() == greedy);
  CHECK(j.at("finish_reason") == "length");
  CHECK(j.at("stop_reason").is_null());
  // The default is greedy too.
  const auto d = generate_json({"--max-tokens", std::to_string(n)});
  CHECK(d.at("token_ids") == j.at("token_ids"));
  CHECK(d.at("text") == j.at("text"));
}

TEST_CASE("generate: streamed text equals the JSON text", "[cli][generate]") {
  const auto fox = reference_prompt("fox");
  const auto j = generate_json({"--max-tokens", "8"});
  const Run r = generate({"--model", kModel, "--prompt-ids",
                          ids_text(fox.at("tokens").get<std::vector<int32_t>>()), "--max-tokens",
                          "8", "--threads", "1"});
  REQUIRE(r.rc == 0);
  CHECK(r.out == j.at("text").get<std::string>() + "\n");
}

TEST_CASE("generate: --prompt text tokenizes like llama.cpp", "[cli][generate]") {
  const auto fox = reference_prompt("fox");
  const auto greedy = fox.at("greedy_tokens").get<std::vector<int32_t>>();
  const Run r = generate({"--model", kModel, "--prompt", fox.at("text").get<std::string>(),
                          "--max-tokens", "4", "--json", "--threads", "1"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("token_ids").get<std::vector<int32_t>>() ==
        std::vector<int32_t>(greedy.begin(), greedy.begin() + 4));
}

TEST_CASE("generate: a seed reproduces a sampled run; another seed changes it", "[cli][generate]") {
  const std::vector<std::string> common = {"--max-tokens", "32", "--temperature", "0.8"};
  auto with_seed = [&](const std::string& seed) {
    auto args = common;
    args.insert(args.end(), {"--seed", seed});
    return generate_json(args);
  };
  const auto a = with_seed("7");
  const auto b = with_seed("7");
  const auto c = with_seed("8");
  CHECK(a.at("token_ids").size() == 32);
  CHECK(a.at("token_ids") == b.at("token_ids"));
  CHECK(a.at("text") == b.at("text"));
  CHECK(a.at("token_ids") != c.at("token_ids"));
  // Sampling at 0.8 over a random model's flat logits leaves the greedy path.
  const auto greedy = generate_json({"--max-tokens", "32"});
  CHECK(a.at("token_ids") != greedy.at("token_ids"));
}

TEST_CASE("generate: a stop string ends the output before it", "[cli][generate]") {
  const auto full = generate_json({"--max-tokens", "16"});
  const std::string text = full.at("text");
  // A stop string from the middle of the greedy text (llama.cpp's text is " sub orderann ...").
  const std::string needle = "ann";
  const size_t at = text.find(needle);
  REQUIRE(at != std::string::npos);
  REQUIRE(at > 0);
  const auto j = generate_json({"--max-tokens", "16", "--stop", needle, "--stop", "never-seen"});
  CHECK(j.at("finish_reason") == "stop");
  CHECK(j.at("stop_reason") == needle);
  CHECK(j.at("text") == text.substr(0, at));
  const auto ids = j.at("token_ids").get<std::vector<int32_t>>();
  const auto all = full.at("token_ids").get<std::vector<int32_t>>();
  REQUIRE(ids.size() < all.size());
  CHECK(std::equal(ids.begin(), ids.end(), all.begin()));
}

TEST_CASE("generate: a stop token id ends the output without that token", "[cli][generate]") {
  const auto greedy = reference_prompt("fox").at("greedy_tokens").get<std::vector<int32_t>>();
  const auto j =
      generate_json({"--max-tokens", "16", "--stop-token-id", std::to_string(greedy[3])});
  CHECK(j.at("finish_reason") == "stop");
  CHECK(j.at("stop_reason") == greedy[3]);
  CHECK(j.at("token_ids").get<std::vector<int32_t>>() ==
        std::vector<int32_t>(greedy.begin(), greedy.begin() + 3));
}

TEST_CASE("generate: --max-tokens ends with length", "[cli][generate]") {
  const auto j = generate_json({"--max-tokens", "3"});
  CHECK(j.at("token_ids").size() == 3);
  CHECK(j.at("finish_reason") == "length");
}

TEST_CASE("generate: bad parameters exit 2 naming the parameter", "[cli][generate]") {
  const auto fox = reference_prompt("fox");
  const std::string ids = ids_text(fox.at("tokens").get<std::vector<int32_t>>());
  struct Case {
    std::vector<std::string> flags;
    std::string named;
  };
  const std::vector<Case> cases = {
      {{"--top-p", "1.5"}, "top_p"},
      {{"--top-p", "0"}, "top_p"},
      {{"--min-p", "-0.1"}, "min_p"},
      {{"--temperature", "-1"}, "temperature"},
      {{"--repetition-penalty", "0"}, "repetition_penalty"},
      {{"--presence-penalty", "3"}, "presence_penalty"},
      {{"--frequency-penalty", "-2.5"}, "frequency_penalty"},
      {{"--max-tokens", "0"}, "max_tokens"},
      {{"--max-tokens", "100000"}, "max_tokens"},
      {{"--stop-token-id", "999999"}, "stop_token_ids"},
      {{"--top-p", "abc"}, "--top-p"},
      {{"--seed", "-1"}, "--seed"},
      {{"--max-tokens", "4x"}, "--max-tokens"},
      {{"--temperature"}, "--temperature"},
      {{"--bogus", "1"}, "--bogus"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--model", kModel, "--prompt-ids", ids};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const Run r = generate(args);
    INFO(c.flags.front() << " -> " << r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find(c.named) != std::string::npos);
    CHECK(r.out.empty());
  }
  // Neither or both prompts.
  CHECK(generate({"--model", kModel}).rc == 2);
  CHECK(generate({"--model", kModel, "--prompt", "x", "--prompt-ids", "1"}).rc == 2);
  // A prompt id outside the vocabulary.
  const Run r = generate({"--model", kModel, "--prompt-ids", "5 2051"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("2051") != std::string::npos);
}

TEST_CASE("tokenize: prints llama.cpp's prompt ids", "[cli][tokenize]") {
  for (const char* name : {"fox", "chat"}) {
    const auto p = reference_prompt(name);
    const Run r = tokenize({"--model", kModel, "--parse-special", p.at("text")});
    INFO(name << ": " << r.err);
    REQUIRE(r.rc == 0);
    CHECK(r.out == ids_text(p.at("tokens").get<std::vector<int32_t>>()) + "\n");
  }
  // Without --parse-special the chat markers are plain text, not the control tokens.
  const auto chat = reference_prompt("chat");
  const Run plain = tokenize({"--model", kModel, chat.at("text")});
  REQUIRE(plain.rc == 0);
  CHECK(plain.out.find("2049") == std::string::npos);
  CHECK(tokenize({"--model", kTinyMoe + "missing.gguf", "x"}).rc == 2);
  CHECK(tokenize({"--model", kTinyMoe, "x"}).rc == 2);  // a directory without tokenizer.json
}

TEST_CASE("tokenize / detokenize: an HF tokenizer directory works like the GGUF",
          "[cli][tokenize]") {
  const std::string hf_dir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/tokenizer/tiny-moe";
  const auto chat = reference_prompt("chat");
  const std::string expected = ids_text(chat.at("tokens").get<std::vector<int32_t>>());
  const Run r = tokenize({"--model", hf_dir, "--parse-special", chat.at("text")});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out == expected + "\n");
  std::ostringstream out;
  std::ostringstream err;
  REQUIRE(detokenize_main(std::vector<std::string>{"--model", hf_dir, expected}, out, err) == 0);
  CHECK(out.str() == chat.at("text").get<std::string>() + "\n");
}

TEST_CASE("generate: an HF directory without tokenizer.json prints ids and refuses --prompt",
          "[cli][generate]") {
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/qwen3_moe";
  std::ifstream in(dir + "/reference.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto ref = nlohmann::json::parse(ss.str());
  const auto& p = ref.at("prompts").at(0);
  const auto prompt = p.at("prompt").get<std::vector<int32_t>>();
  const auto greedy = p.at("greedy_next").get<std::vector<int32_t>>();
  // transformers' greedy loop does not stop at EOS, hence --ignore-eos.
  const Run r = generate({"--model", dir, "--prompt-ids", ids_text(prompt), "--max-tokens", "8",
                          "--ignore-eos", "--threads", "1"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out == ids_text(std::vector<int32_t>(greedy.begin(), greedy.begin() + 8)) + "\n");
  const Run refused = generate({"--model", dir, "--prompt", "hello"});
  CHECK(refused.rc == 2);
  CHECK(refused.err.find("tokenizer") != std::string::npos);
  CHECK(refused.err.find("--prompt-ids") != std::string::npos);
}

}  // namespace
}  // namespace tandem::cli
