// CpuExpertWorker's ExpertCopies::after_layer on a model read into memory: with
// model::drop_released_copies there, each layer's expert bytes leave memory as soon as that layer
// is copied, while the next layer's are still readable, so start-up never holds the model twice.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/experts/experts.h"
#include "engine/model/checkpoint.h"
#include "tests/model/page_residency.h"

namespace tandem::experts {
namespace {

// A page wholly inside layer l's fused gate tensor (all experts' gates back to back), or null
// (no MoE layer, or a tensor under two pages).
const void* gate_page(const model::ModelWeights& weights, size_t l) {
  const model::LayerWeights& lw = weights.layers[l];
  if (!lw.moe) return nullptr;
  const size_t page = testing::page_size();
  const auto begin = reinterpret_cast<uintptr_t>(lw.experts_gate.expert(0).data.data());
  const size_t n = lw.experts_gate.n_experts();
  const std::span<const uint8_t> last = lw.experts_gate.expert(n - 1).data;
  const auto end = reinterpret_cast<uintptr_t>(last.data() + last.size());
  const uintptr_t first = (begin + page - 1) / page * page;
  return first + page <= end ? reinterpret_cast<const void*>(first) : nullptr;
}

TEST_CASE("read into memory, each layer's expert bytes are freed as soon as it is copied",
          "[experts]") {
  const std::string path = std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf";
  Result<model::Checkpoint> c = model::open_model(path);
  REQUIRE(c.ok());
  REQUIRE(model::load_checkpoint_into_memory(*c).ok());
  const model::ModelWeights& weights = *c->weights;
  const auto mode = kernels::MatmulActivations::kQuantized;
  if (!kernels::interleaved_layout_preferred(TensorType::kQ8_0)) {
    WARN("the active kernels read Q8_0 experts from their rows: nothing is copied or freed");
    return;
  }
  const size_t n_layers = weights.layers.size();
  // Per call (one per layer, in order): the permissions of that layer's gate page and of the
  // next layer's, after the drop.
  std::vector<std::pair<std::string, std::string>> seen;
  ThreadPool two(2);
  ExpertCopies copies;
  copies.after_layer = [&] {
    model::drop_released_copies(*c);
    const size_t l = seen.size();
    const void* here = gate_page(weights, l);
    const void* next = l + 1 < n_layers ? gate_page(weights, l + 1) : nullptr;
    seen.emplace_back(here != nullptr ? testing::page_permissions(here) : "",
                      next != nullptr ? testing::page_permissions(next) : "");
  };
  auto worker = CpuExpertWorker::create(*c->spec, weights, &two, mode, copies);
  REQUIRE(worker.ok());
  REQUIRE(seen.size() == n_layers);
  size_t checked = 0;
  for (size_t l = 0; l < n_layers; ++l) {
    INFO("layer " << l);
    if (gate_page(weights, l) == nullptr) continue;
    ++checked;
    CHECK(seen[l].first == "---p");  // copied and freed
    if (l + 1 < n_layers && gate_page(weights, l + 1) != nullptr) {
      CHECK(seen[l].second == "r--p");  // not copied yet: still the read copy
    }
  }
  CHECK(checked >= 2);
}

}  // namespace
}  // namespace tandem::experts
