// Test helpers: load the llama.cpp vocab fixtures (shared/data/vocab) and their test cases.
#pragma once

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace tandem::tokenizer::testing {

inline std::string vocab_path(const std::string& name) {
  return std::string(TANDEM_SHARED_DIR) + "/data/vocab/ggml-vocab-" + name + ".gguf";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loaded once per vocab and kept for the whole test run (loading qwen2 takes a moment).
inline const Tokenizer& vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto loaded = Tokenizer::load_gguf(vocab_path(name));
    INFO(loaded.status().to_string());
    REQUIRE(loaded.ok());
    it = cache.emplace(name, std::make_unique<Tokenizer>(std::move(loaded).value())).first;
  }
  return *it->second;
}

struct VocabCase {
  std::string input;
  std::vector<int32_t> expected;
};

// Reads <vocab>.inp / .out as the vocab README describes.
inline std::vector<VocabCase> vocab_cases(const std::string& name) {
  const std::string inp = read_file(vocab_path(name) + ".inp");
  const std::string out = read_file(vocab_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) {
      cases.push_back({inp.substr(pos), {}});
      break;
    }
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    REQUIRE(i < cases.size());
    std::istringstream ids(line);
    int64_t id = 0;
    while (ids >> id) cases[i].expected.push_back(static_cast<int32_t>(id));
    ++i;
  }
  REQUIRE(i == cases.size());
  return cases;
}

// Printable rendering of bytes for failure messages.
inline std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

inline std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

}  // namespace tandem::tokenizer::testing
