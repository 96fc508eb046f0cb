// model.load_mode read (EngineOptions::read_into_memory): once start-up is done, the copy's bytes
// of the weights the CPU repacked, and of the file tensors that copies converted at open replaced,
// are freed and unreadable (model::drop_released_copies), and the engine computes the same
// logits, bit for bit, as on the file's mapping.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/facade/engine.h"
#include "tests/facade/engine_test_support.h"
#include "tests/model/page_residency.h"

namespace tandem::engine {
namespace {

// The logits of every position of `ids` from a fresh cache.
std::vector<float> prompt_logits(Engine& engine, const std::vector<int32_t>& ids) {
  Result<std::unique_ptr<runtime::KvCache>> cache = engine.sequence_cache(ids.size());
  REQUIRE(cache.ok());
  runtime::ForwardOutput out;
  const runtime::SequenceInput seq{cache->get(), ids, 0, runtime::LogitsWanted::kAll};
  REQUIRE(engine.runner().forward({&seq, 1}, out).ok());
  return out.logits;
}

// Whether some page of the checkpoint's expert tensors was dropped: a page of a layer's gate
// tensor that the CPU worker copied, now unreadable.
bool expert_pages_dropped(Engine& engine) {
  const model::ModelWeights& weights = *engine.checkpoint().weights;
  const experts::CpuExpertWorker& worker = engine.runner().cpu_worker();
  const size_t page = testing::page_size();
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::LayerWeights& lw = weights.layers[l];
    if (!lw.moe || worker.expert(l, 0).gate.layout == kernels::WeightLayout::kRows) continue;
    const std::span<const uint8_t> all = lw.experts_gate.expert(0).data;
    const size_t n = lw.experts_gate.n_experts();
    const uint8_t* last = lw.experts_gate.expert(n - 1).data.data();
    // A page wholly inside the tensor (all experts' gates back to back).
    const auto first_whole = (reinterpret_cast<uintptr_t>(all.data()) + page - 1) / page * page;
    if (first_whole + page <= reinterpret_cast<uintptr_t>(last)) {
      return testing::page_permissions(reinterpret_cast<const void*>(first_whole)) == "---p";
    }
  }
  return false;
}

// A page wholly inside the file bytes of a tensor that a copy converted at open replaced
// (Checkpoint::replaced_bytes), or null.
const void* replaced_page(Engine& engine) {
  const size_t page = testing::page_size();
  for (const std::span<const uint8_t> bytes : engine.checkpoint().replaced_bytes) {
    const auto first = (reinterpret_cast<uintptr_t>(bytes.data()) + page - 1) / page * page;
    if (first + page <= reinterpret_cast<uintptr_t>(bytes.data() + bytes.size())) {
      return reinterpret_cast<const void*>(first);
    }
  }
  return nullptr;
}

TEST_CASE("load_mode read frees the repacked weights' copy after start-up, same logits",
          "[engine]") {
  const std::string data = std::string(TANDEM_SHARED_DIR) + "/data/";
  const std::string fixtures = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/";
  // The first three have expert types the x86 kernels repack straight from the file, the HF
  // gpt-oss fixture MXFP4 experts converted at open from HF's blocks and scales (whose converted
  // bytes are freed after the repack in mmap mode too); the others (F32, BF16, FP8 blocks,
  // GLM-4.5 and MiniMax-M2 GGUFs) check that the drop frees nothing their start-up still reads.
  struct Case {
    std::string path;
    bool repacked;   // expert copies expected where the CPU has AVX2
    bool converted;  // the repacked experts come from bytes converted at open (freed mapped too)
    bool replaces;   // tensors converted at open replace file tensors of a page or more
  };
  const Case cases[] = {{kDemo, true, false, false},
                        {data + "tiny-deepseek2/tiny-deepseek2-q4_k_m.gguf", true, false, false},
                        {data + "tiny-gpt-oss/tiny-gpt-oss-q8_0.gguf", true, false, false},
                        {fixtures + "hf/gpt_oss_mxfp4", true, true, true},
                        {fixtures + "hf/deepseek_v3_fp8", false, false, true},
                        {fixtures + "hf/qwen3_moe_bf16", false, false, false},
                        {fixtures + "gguf/arch/glm4moe.gguf", false, false, false},
                        {fixtures + "gguf/arch/minimax-m2.gguf", false, false, false}};
  for (const auto& [path, repacked, converted, replaces] : cases) {
    INFO(path);
    if (!std::filesystem::exists(path)) {
      WARN(path << " is not here: case skipped");
      continue;
    }
    EngineOptions o = demo_options(DenseDevice::kCpu);
    o.model_path = path;
    o.load_tokenizer = false;  // the architecture fixtures carry none
    const Result<std::unique_ptr<Engine>> mapped = Engine::create(o);
    REQUIRE(mapped.ok());
    o.read_into_memory = true;
    const Result<std::unique_ptr<Engine>> read = Engine::create(o);
    REQUIRE(read.ok());
    const std::vector<int32_t> ids = {1, 17, 42, 5, 99, 3, 64, 7, 12};  // within every vocabulary
    const std::vector<float> a = prompt_logits(**mapped, ids);
    const std::vector<float> b = prompt_logits(**read, ids);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    bool copied = false;
    for (size_t l = 0; l < (*read)->spec().n_layers; ++l) {
      copied |=
          (*read)->spec().moe_layers[l] &&
          (*read)->runner().cpu_worker().expert(l, 0).gate.layout != kernels::WeightLayout::kRows;
    }
    // The file bytes of tensors replaced by converted copies: unmapped at open, and the read
    // copy's freed after start-up.
    if (const void* page = replaced_page(**mapped)) {
      CHECK_FALSE(testing::page_present(page));
      const void* read_page = replaced_page(**read);
      REQUIRE(read_page != nullptr);
      CHECK(testing::page_permissions(read_page) == "---p");
    }
    CHECK((replaced_page(**mapped) != nullptr) == replaces);
    if (copied && repacked) {
      CHECK(expert_pages_dropped(**read));
      // Converted at open, the experts' source is the process's own memory in either mode.
      CHECK(expert_pages_dropped(**mapped) == converted);
    } else if (repacked) {
      WARN("no expert copies on this CPU for " << path << ": the drop is not checked");
    }
  }
}

}  // namespace
}  // namespace tandem::engine
