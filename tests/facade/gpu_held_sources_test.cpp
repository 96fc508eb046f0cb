// Tests of release_gpu_held_sources on weights bound by hand to a mapped pattern file: the GPU's
// experts and, with the dense parts on the GPU, the dense tensors and an untied head leave the
// process; the CPU's experts and the embedding stay; every byte reads back unchanged.
#include "engine/facade/gpu_held_sources.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/mapped_file.h"
#include "tests/model/page_residency.h"

namespace tandem::engine {
namespace {

using testing::page_present;

// One MoE layer over a pattern file of 13 pages, every tensor page-aligned, one page per expert
// matrix (8 x 128 F32): gate, up and down fused over 3 experts (pages 0-8), attn_q of two pages
// (9-10), the token embedding (11) and the head (12).
struct MappedWeights {
  std::string path;
  std::optional<model::MappedFile> file;
  std::vector<model::TensorInfo> tensors;
  model::ModelWeights weights;

  std::span<const uint8_t> page(size_t p) const {
    return file->bytes().subspan(p * testing::page_size(), testing::page_size());
  }
};

std::unique_ptr<MappedWeights> mapped_weights(bool tied) {
  const size_t page = testing::page_size();
  REQUIRE(page == 8 * 128 * sizeof(float));
  auto m = std::make_unique<MappedWeights>();
  m->path = testing::pattern_file(13 * page);
  Result<model::MappedFile> file = model::MappedFile::open(m->path);
  REQUIRE(file.ok());
  m->file.emplace(std::move(*file));
  const auto tensor = [&](size_t first_page, size_t pages, std::vector<uint64_t> shape) {
    model::TensorInfo t;
    t.type = TensorType::kF32;
    t.shape = std::move(shape);
    t.data = m->file->bytes().subspan(first_page * page, pages * page);
    return t;
  };
  m->tensors = {tensor(0, 3, {3, 8, 128}), tensor(3, 3, {3, 8, 128}), tensor(6, 3, {3, 8, 128}),
                tensor(9, 2, {16, 128}),   tensor(11, 1, {8, 128}),   tensor(12, 1, {8, 128})};
  model::LayerWeights layer;
  layer.moe = true;
  layer.experts_gate = model::ExpertWeights::fused(&m->tensors[0]);
  layer.experts_up = model::ExpertWeights::fused(&m->tensors[1]);
  layer.experts_down = model::ExpertWeights::fused(&m->tensors[2]);
  layer.tensors[static_cast<size_t>(model::WeightRole::kAttnQ)] = &m->tensors[3];
  m->weights.layers.push_back(layer);
  m->weights.token_embedding = &m->tensors[4];
  m->weights.tied_embeddings = tied;
  m->weights.lm_head = tied ? &m->tensors[4] : &m->tensors[5];
  REQUIRE(testing::pattern_mismatches(m->file->bytes()) == 0);  // every page mapped
  return m;
}

// The pages of the file mapped in this process, as a string of '1' and '0'.
std::string present_pages(const MappedWeights& m) {
  std::string s;
  for (size_t p = 0; p < 13; ++p) s += page_present(m.page(p).data()) ? '1' : '0';
  return s;
}

TEST_CASE(
    "release_gpu_held_sources drops the GPU's experts and, with dense on the GPU, its dense "
    "parts",
    "[facade]") {
  const size_t page = testing::page_size();
  {
    const std::unique_ptr<MappedWeights> m = mapped_weights(false);
    const std::vector<std::pair<uint32_t, uint32_t>> gpu = {{0, 1}};
    CHECK(release_gpu_held_sources(m->weights, gpu, false) == 3 * page);
    // Expert 1 of gate (page 1), up (4) and down (7); dense parts stay.
    CHECK(present_pages(*m) == "1011011011111");
    CHECK(testing::pattern_mismatches(m->file->bytes()) == 0);

    CHECK(release_gpu_held_sources(m->weights, {}, true) == 3 * page);
    // attn_q (9, 10) and the head (12); the embedding (11) stays.
    CHECK(present_pages(*m) == "1111111110010");
    CHECK(testing::pattern_mismatches(m->file->bytes()) == 0);

    // Pairs outside the model are skipped.
    const std::vector<std::pair<uint32_t, uint32_t>> outside = {{1, 0}, {0, 7}};
    CHECK(release_gpu_held_sources(m->weights, outside, false) == 0);
    std::remove(m->path.c_str());
  }
  {
    // A head tied to the embedding stays: token lookups read it.
    const std::unique_ptr<MappedWeights> m = mapped_weights(true);
    CHECK(release_gpu_held_sources(m->weights, {}, true) == 2 * page);
    CHECK(present_pages(*m) == "1111111110011");
    std::remove(m->path.c_str());
  }
}

}  // namespace
}  // namespace tandem::engine
