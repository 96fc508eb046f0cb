// Helpers for the forward-pass tests: open a model with a runner, read reference logits, run a
// prompt, decode greedily.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/runtime/runtime.h"

namespace tandem::runtime::testing {

inline std::string tiny_moe_dir() {
  return std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/";
}
inline std::string hf_dir(const std::string& arch) {
  return std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/" + arch + "/";
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  REQUIRE(in.good());
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  return v;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

struct LoadedModel {
  model::Checkpoint checkpoint;
  std::unique_ptr<ModelRunner> runner;
};

inline std::unique_ptr<LoadedModel> load_model(const std::string& path, int threads = 2,
                                               bool quantized_activations = true,
                                               bool repack = true,
                                               kernels::KvType kv_type = kernels::KvType::kF32,
                                               MlaPrefill mla_prefill = MlaPrefill::kAuto) {
  auto ckpt = model::open_model(path);
  INFO(path << ": " << (ckpt.ok() ? "" : ckpt.status().to_string()));
  REQUIRE(ckpt.ok());
  auto loaded = std::make_unique<LoadedModel>();
  loaded->checkpoint = std::move(ckpt).value();
  RunnerOptions options;
  options.threads = threads;
  options.quantized_activations = quantized_activations;
  options.interleave_experts = repack;
  options.interleave_dense = repack;
  options.kv_type = kv_type;
  options.mla_prefill = mla_prefill;
  auto runner = ModelRunner::create(*loaded->checkpoint.spec, *loaded->checkpoint.weights, options);
  INFO((runner.ok() ? "" : runner.status().to_string()));
  REQUIRE(runner.ok());
  loaded->runner = std::move(runner).value();
  return loaded;
}

// Logits of every position of `ids` run as one prefill batch on a fresh cache (left in *cache).
inline std::vector<float> prefill_all(ModelRunner& runner, const std::vector<int32_t>& ids,
                                      KvCache& cache) {
  SequenceInput seq{&cache, ids, 0, LogitsWanted::kAll};
  ForwardOutput out;
  const Status s = runner.forward({&seq, 1}, out);
  INFO(s.to_string());
  REQUIRE(s.ok());
  REQUIRE(out.n_rows[0] == ids.size());
  return out.logits;
}

inline int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// Prefill, then n greedy tokens, each fed back through a one-token decode step.
inline std::vector<int32_t> greedy(ModelRunner& runner, const std::vector<int32_t>& ids, size_t n) {
  auto cache = runner.new_kv_cache();
  SequenceInput seq{cache.get(), ids, 0, LogitsWanted::kLast};
  ForwardOutput out;
  REQUIRE(runner.forward({&seq, 1}, out).ok());
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < n; ++i) {
    const int32_t next = argmax(out.row(0, 0));
    tokens.push_back(next);
    if (i + 1 == n) break;
    std::vector<int32_t> one{next};
    SequenceInput step{cache.get(), one, cache->length(), LogitsWanted::kLast};
    const Status s = runner.forward({&step, 1}, out);
    REQUIRE(s.ok());
  }
  return tokens;
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace tandem::runtime::testing
