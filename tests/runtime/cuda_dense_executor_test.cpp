// ModelRunner with CudaDenseExecutor against the CPU path on the tiny models (tag [cuda]): logits
// within tolerance and the same greedy tokens, with and without a CUDA expert worker, the memory
// estimate against what create() allocated, and enable_cuda_dense on a Scheduler.
//
// Catch2 v2 has no SKIP: without a CUDA device each case WARNs "no CUDA device: ..." and returns.
//
// Tolerance. The CPU side runs with quantized_activations = false, so both paths compute the same
// float arithmetic on the same weights (Q8_0 dequantized exactly in both) and differ only in the
// order of float sums (warp/tile reductions vs sequential SIMD lanes) and in expf/rsqrtf
// implementations. Each dot product of length <= 256 then carries a relative error of a few 1e-7;
// through two layers, softmax attention, routing weights and the head this stays below 1e-4 for
// logits of magnitude ~10 (the CPU path matches llama.cpp, another summation order, to 1e-4 in
// tiny_moe_forward_test). We allow 1e-3 absolute, ten times that, and require identical greedy
// tokens (the fixtures' top-2 margins are far larger). A routing flip (two experts' probabilities
// within 1e-6) would exceed it; the measured maxima are printed for the record.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/experts/cuda_expert_worker.h"
#include "engine/runtime/cuda_dense_executor.h"
#include "engine/runtime/scheduler.h"
#include "tests/runtime/paged_pool.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

constexpr float kTolerance = 1e-3f;
constexpr size_t kMaxTokens = 256;

bool have_device() {
  if (experts::cuda_device_count() > 0) return true;
  WARN("no CUDA device: cudaGetDeviceCount reports none; [cuda] case skipped");
  return false;
}

KvGeometry geometry_of(const KvPool& pool, DeviceWindowRings rings = {}) {
  return {pool.n_layers(), pool.kv_dim(), pool.block_tokens(), pool.n_blocks(), pool.type(), rings};
}

// Creates the executor on p.pool (with window rings when given), checks its bytes against the
// estimate and installs it.
void install_cuda(LoadedModel& m, PagedPool& p, DeviceWindowRings rings = {}) {
  const model::ModelSpec& spec = *m.checkpoint.spec;
  const model::ModelWeights& w = *m.checkpoint.weights;
  CudaDenseOptions options{0, kMaxTokens};
  options.window_rings = rings;
  auto exec = CudaDenseExecutor::create(spec, w, *p.pool, options);
  INFO((exec.ok() ? "" : exec.status().to_string()));
  REQUIRE(exec.ok());
  auto est = estimate_cuda_dense_bytes(spec, w, geometry_of(*p.pool, rings), kMaxTokens);
  REQUIRE(est.ok());
  const CudaDenseBytes got = (*exec)->info().bytes;
  CHECK(got.dense_weights == est->dense_weights);
  CHECK(got.kv == est->kv);
  CHECK(got.scratch == est->scratch);
  REQUIRE(m.runner->set_dense_executor(std::move(exec).value()).ok());
}

// A reference model file left out of what scripts/gpu-carry.sh carries to a GPU machine (where
// ../shared is not): the comparison says so and skips; everywhere else the file is there. The
// words "case skipped" make CTest report the whole case as skipped, not passed, even where its
// other comparisons ran.
bool carried(const std::string& path) {
  if (std::filesystem::exists(path)) return true;
  WARN(path << " is not here (not carried to this machine): comparison skipped, so this [cuda] "
               "case skipped in part");
  return false;
}

std::vector<std::vector<int32_t>> prompts_of(const std::string& ref_path, const char* key) {
  if (!std::filesystem::exists(ref_path)) return {};  // with its model: compare() skips
  const auto ref = read_json(ref_path);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : ref["prompts"]) prompts.push_back(p[key].get<std::vector<int32_t>>());
  return prompts;
}

// Three prompts prefilled in one batch (every row's logits), then 16 greedy decode steps of all
// three in one batch; both sides are fed the CPU's tokens. The device side's caches come from a
// pool of every layer, or (full_layer_pool) of the full-attention layers only, wrapped as the
// scheduler wraps them for a model with sliding-window layers. kv_type: both sides' caches (the
// CPU's own, the device side's pool and so its mirror).
// With rings (full_layer_pool only) the windowed layers live in the executor's window rings.
void compare(const std::string& path, const std::vector<std::vector<int32_t>>& prompts,
             bool half_experts_on_gpu, bool full_layer_pool = false,
             kernels::KvType kv_type = kernels::KvType::kF32, bool rings = false) {
  INFO(path << (half_experts_on_gpu ? " with a CUDA expert worker" : "") << ", KV "
            << kernels::kv_type_name(kv_type));
  if (!carried(path)) return;
  REQUIRE(prompts.size() == 3);
  std::unique_ptr<experts::CudaExpertWorker> gpu_experts;  // outlives the runner's use of it
  auto cpu = load_model(path, 2, false, true, kv_type);
  auto dev = load_model(path, 2, false, true, kv_type);
  const model::ModelSpec& spec = dev->runner->spec();
  PagedPool p = full_layer_pool ? make_full_layer_pool(*dev->runner, 16, 128)
                                : make_pool(*dev->runner, 16, 128);
  const size_t pass = 64;  // the prompts are 52-62 tokens, each prefilled in one pass
  install_cuda(
      *dev, p,
      rings ? DeviceWindowRings{4, device_window_ring_blocks(spec.sliding_window, pass, 16), pass}
            : DeviceWindowRings{});
  if (half_experts_on_gpu) {
    auto map = experts::ExpertMap::uniform(spec.n_layers, spec.n_experts, 0);
    for (size_t l = 0; l < spec.n_layers; ++l) {
      for (size_t e = spec.n_experts / 2; e < spec.n_experts; ++e) map.set(l, e, 1);
    }
    auto worker =
        experts::CudaExpertWorker::create(spec, *dev->checkpoint.weights, map, {0, uint8_t{1}});
    INFO((worker.ok() ? "" : worker.status().to_string()));
    REQUIRE(worker.ok());
    gpu_experts = std::move(worker).value();
    REQUIRE(
        dev->runner->set_expert_workers({&dev->runner->cpu_worker(), gpu_experts.get()}, map).ok());
  }
  std::vector<std::unique_ptr<KvCache>> cc;
  std::vector<std::unique_ptr<KvCache>> dc;
  std::vector<SequenceInput> cb, db;
  for (size_t s = 0; s < 3; ++s) {
    cc.push_back(cpu->runner->new_kv_cache(256));
    auto paged = std::make_unique<PagedKvCache>(*p.pool, *p.allocator, s + 1, 256);
    dc.push_back(full_layer_pool ? dev->runner->wrap_kv_cache(std::move(paged), 256)
                                 : std::move(paged));
    cb.push_back({cc[s].get(), prompts[s], 0, LogitsWanted::kAll});
    db.push_back({dc[s].get(), prompts[s], 0, LogitsWanted::kAll});
  }
  ForwardOutput a, b;
  REQUIRE(cpu->runner->forward(cb, a).ok());
  const Status sb = dev->runner->forward(db, b);
  INFO(sb.to_string());
  REQUIRE(sb.ok());
  REQUIRE(a.n_rows == b.n_rows);
  const float prefill_diff = max_abs_diff(a.logits, b.logits);
  CHECK(prefill_diff < kTolerance);

  float decode_diff = 0.0f;
  std::vector<std::vector<int32_t>> next(3);
  for (size_t step = 0; step < 16; ++step) {
    INFO("decode step " << step);
    cb.clear();
    db.clear();
    for (size_t s = 0; s < 3; ++s) {
      const int32_t want = argmax(a.row(s, a.n_rows[s] - 1));
      CHECK(argmax(b.row(s, b.n_rows[s] - 1)) == want);
      next[s] = {want};
      cb.push_back({cc[s].get(), next[s], cc[s]->length(), LogitsWanted::kLast});
      db.push_back({dc[s].get(), next[s], dc[s]->length(), LogitsWanted::kLast});
    }
    REQUIRE(cpu->runner->forward(cb, a).ok());
    REQUIRE(dev->runner->forward(db, b).ok());
    decode_diff = std::max(decode_diff, max_abs_diff(a.logits, b.logits));
  }
  CHECK(decode_diff < kTolerance);
  std::cout << "[cuda dense] " << path << (half_experts_on_gpu ? " (+gpu experts)" : "")
            << ": max |dlogit| prefill " << prefill_diff << ", decode " << decode_diff << "\n";
}

TEST_CASE("CUDA dense executor matches the CPU path on tiny-moe (F32, Q8_0)", "[cuda][runtime]") {
  if (!have_device()) return;
  const std::string dir = tiny_moe_dir();
  compare(dir + "tiny-moe-f32.gguf", prompts_of(dir + "ref-f32.json", "tokens"), false);
  compare(dir + "tiny-moe-q8_0.gguf", prompts_of(dir + "ref-q8_0.json", "tokens"), false);
}

TEST_CASE("CUDA dense executor with a CUDA expert worker holding half the experts",
          "[cuda][runtime]") {
  if (!have_device()) return;
  const std::string dir = tiny_moe_dir();
  compare(dir + "tiny-moe-f32.gguf", prompts_of(dir + "ref-f32.json", "tokens"), true);
  compare(hf_dir("qwen2_moe"), prompts_of(hf_dir("qwen2_moe") + "reference.json", "prompt"), true);
}

TEST_CASE("CUDA dense executor on HF models (shared expert + biases, whole-projection norm)",
          "[cuda][runtime]") {
  if (!have_device()) return;
  for (const char* arch : {"qwen2_moe", "olmoe", "mixtral_sharded", "qwen3_moe_bf16"}) {
    compare(hf_dir(arch), prompts_of(hf_dir(arch) + "reference.json", "prompt"), false);
  }
}

TEST_CASE("CUDA dense executor on the sigmoid-routed GQA families (GLM-4.5, MiniMax-M2)",
          "[cuda][runtime]") {
  // Partial NEOX RoPE, per-head and whole-projection QK norms, q/k/v biases, a leading dense
  // layer and a plain shared expert on the device; sigmoid routing with the selection bias on the
  // host.
  if (!have_device()) return;
  for (const char* arch : {"glm4_moe", "minimax_m2"}) {
    compare(hf_dir(arch), prompts_of(hf_dir(arch) + "reference.json", "prompt"), false);
  }
}

TEST_CASE("CUDA dense executor on gpt-oss (sinks, sliding windows, biases, YaRN, MXFP4 experts)",
          "[cuda][runtime][gpt-oss]") {
  // Windows of 8 over prompts of 52-62 tokens. The scheduler's pool of the full layers (the
  // mirror keeps the windowed layers at their block ids) and a pool of every layer; MXFP4
  // experts on the CPU, then half of them in the CUDA expert worker (clamped SwiGLU, biases).
  if (!have_device()) return;
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  for (const char* file : {"tiny-gpt-oss-all-f32.gguf", "tiny-gpt-oss-f32.gguf"}) {
    const auto prompts = prompts_of(dir + "ref-f32.json", "tokens");
    compare(dir + file, prompts, false, true);
    compare(dir + file, prompts, false, false);
    compare(dir + file, prompts, true, true);
    compare(dir + file, prompts, false, true, kernels::KvType::kF16, true);  // window rings
  }
  compare(hf_dir("gpt_oss_mxfp4"), prompts_of(hf_dir("gpt_oss_mxfp4") + "reference.json", "prompt"),
          false, true);
}

TEST_CASE("CUDA dense executor on deepseek2 (MLA: latent cache, per-head k_b / v_b, YaRN)",
          "[cuda][runtime][deepseek2]") {
  // A keys-only mirror of the latent rows; the split and legacy GGUF layouts, Q8_0 weights, and
  // the HF checkpoints with and without the low-rank query; the sigmoid group-limited router on
  // the host; half the experts in the CUDA expert worker once.
  if (!have_device()) return;
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/";
  compare(dir + "tiny-deepseek2-f32.gguf", prompts_of(dir + "ref-f32.json", "tokens"), false);
  compare(dir + "tiny-deepseek2-f32.gguf", prompts_of(dir + "ref-f32.json", "tokens"), true);
  compare(dir + "tiny-deepseek2-legacy-f32.gguf", prompts_of(dir + "ref-legacy-f32.json", "tokens"),
          false);
  compare(dir + "tiny-deepseek2-q8_0.gguf", prompts_of(dir + "ref-q8_0.json", "tokens"), false);
  for (const char* arch : {"deepseek_v3", "deepseek_v2_lite"}) {
    compare(hf_dir(arch), prompts_of(hf_dir(arch) + "reference.json", "prompt"), false);
  }
}

TEST_CASE("CUDA dense executor over an f16 KV pool (GQA, sinks and windows, MLA)",
          "[cuda][runtime][kv_type]") {
  // The mirror holds halves, written with the host's rounding: the CPU path over its own f16
  // caches is the reference, within the same bound.
  if (!have_device()) return;
  constexpr kernels::KvType kF16 = kernels::KvType::kF16;
  const std::string moe = tiny_moe_dir();
  compare(moe + "tiny-moe-f32.gguf", prompts_of(moe + "ref-f32.json", "tokens"), false, false,
          kF16);
  const std::string oss = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  compare(oss + "tiny-gpt-oss-all-f32.gguf", prompts_of(oss + "ref-f32.json", "tokens"), false,
          true, kF16);
  const std::string ds = std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/";
  compare(ds + "tiny-deepseek2-f32.gguf", prompts_of(ds + "ref-f32.json", "tokens"), false, false,
          kF16);
}

TEST_CASE("CUDA dense executor: copy-on-write of a forked sequence's block on the device",
          "[cuda][runtime]") {
  if (!have_device()) return;
  const std::string path = tiny_moe_dir() + "tiny-moe-f32.gguf";
  const auto prompt = prompts_of(tiny_moe_dir() + "ref-f32.json", "tokens")[0];
  auto cpu = load_model(path, 2, false);
  auto dev = load_model(path, 2, false);
  PagedPool pc = make_pool(*cpu->runner, 3, 200);
  PagedPool pd = make_pool(*dev->runner, 3, 200);
  install_cuda(*dev, pd);
  PagedKvCache cparent(*pc.pool, *pc.allocator, 1, 256);
  PagedKvCache dparent(*pd.pool, *pd.allocator, 1, 256);
  ForwardOutput a, b;
  SequenceInput cs{&cparent, prompt, 0, LogitsWanted::kLast};
  SequenceInput ds{&dparent, prompt, 0, LogitsWanted::kLast};
  REQUIRE(cpu->runner->forward({&cs, 1}, a).ok());
  REQUIRE(dev->runner->forward({&ds, 1}, b).ok());
  REQUIRE(pc.allocator->fork(1, 2).ok());
  REQUIRE(pd.allocator->fork(1, 2).ok());
  PagedKvCache cchild(*pc.pool, *pc.allocator, 2, 256);
  PagedKvCache dchild(*pd.pool, *pd.allocator, 2, 256);
  cchild.set_length(prompt.size());
  dchild.set_length(prompt.size());
  const std::vector<int32_t> t1{5}, t2{9};
  for (int i = 0; i < 4; ++i) {
    INFO("step " << i);
    std::vector<SequenceInput> cb{{&cparent, t1, cparent.length(), LogitsWanted::kLast},
                                  {&cchild, t2, cchild.length(), LogitsWanted::kLast}};
    std::vector<SequenceInput> db{{&dparent, t1, dparent.length(), LogitsWanted::kLast},
                                  {&dchild, t2, dchild.length(), LogitsWanted::kLast}};
    REQUIRE(cpu->runner->forward(cb, a).ok());
    REQUIRE(dev->runner->forward(db, b).ok());
    CHECK(max_abs_diff(a.logits, b.logits) < kTolerance);
  }
}

TEST_CASE("CUDA dense executor allocates what the estimate says", "[cuda][runtime]") {
  if (!have_device()) return;
  auto m = load_model(tiny_moe_dir() + "tiny-moe-q8_0.gguf");
  PagedPool p = make_pool(*m->runner, 16, 4096);  // a KV mirror of a few MiB
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // the context exists before measuring
  size_t free_before = 0, free_after = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  auto exec =
      CudaDenseExecutor::create(*m->checkpoint.spec, *m->checkpoint.weights, *p.pool, {0, 2048});
  REQUIRE(exec.ok());
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  auto est = estimate_cuda_dense_bytes(*m->checkpoint.spec, *m->checkpoint.weights,
                                       geometry_of(*p.pool), 2048);
  REQUIRE(est.ok());
  const CudaDenseBytes got = (*exec)->info().bytes;
  CHECK(got.total() == est->total());
  CHECK(got.kv == 2 * 2 * 4096 * 16 * m->runner->spec().kv_dim() * sizeof(float));
  // The driver rounds each of the three allocations (and the stream's) up to its granularity.
  const uint64_t used = free_before - free_after;
  std::cout << "[cuda dense] estimate " << est->total() << " bytes, device free dropped by " << used
            << "\n";
  CHECK(used >= est->total());
  CHECK(used <= est->total() + 64 * 1024 * 1024);
  CHECK(CudaDenseExecutor::create(*m->checkpoint.spec, *m->checkpoint.weights, *p.pool,
                                  {experts::cuda_device_count() + 3, 16})
            .status()
            .code() == StatusCode::kInvalidArgument);
}

TEST_CASE("enable_cuda_dense installs the executor on a scheduler's runner", "[cuda][runtime]") {
  if (!have_device()) return;
  auto m = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
  SchedulerOptions options;
  options.limits.max_batch_tokens = 128;
  options.limits.prefill_chunk_tokens = 128;
  options.limits.max_running = 4;
  options.limits.context_length = 128;
  options.kv_blocks = 64;
  auto s = Scheduler::create(std::move(m->runner), options);
  INFO((s.ok() ? "" : s.status().to_string()));
  REQUIRE(s.ok());
  Scheduler& sched = **s;
  auto info = enable_cuda_dense(sched, {});
  INFO((info.ok() ? "" : info.status().to_string()));
  REQUIRE(info.ok());
  CHECK(info->max_batch_tokens == 128);
  CHECK(sched.runner().dense_executor() != nullptr);
  auto est = estimate_cuda_dense_bytes(*m->checkpoint.spec, *m->checkpoint.weights,
                                       geometry_of(sched.kv_pool()), 128);
  REQUIRE(est.ok());
  CHECK(info->bytes.total() == est->total());
  // A forward through the scheduler's pool gives the CPU path's greedy token.
  auto cpu = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf", 2, false);
  const auto prompt = prompts_of(tiny_moe_dir() + "ref-f32.json", "tokens")[1];
  KvBlockAllocator allocator =
      std::move(
          KvBlockAllocator::create({static_cast<int64_t>(sched.kv_pool().bytes()), 16,
                                    static_cast<int64_t>(sched.kv_pool().bytes() / (64 * 16))}))
          .value();
  PagedKvCache paged(sched.kv_pool(), allocator, 1, 128);
  auto dense = cpu->runner->new_kv_cache();
  SequenceInput ds{&paged, prompt, 0, LogitsWanted::kLast};
  SequenceInput cs{dense.get(), prompt, 0, LogitsWanted::kLast};
  ForwardOutput a, b;
  REQUIRE(cpu->runner->forward({&cs, 1}, a).ok());
  REQUIRE(sched.runner().forward({&ds, 1}, b).ok());
  CHECK(max_abs_diff(a.logits, b.logits) < kTolerance);
  CHECK(argmax(a.row(0, 0)) == argmax(b.row(0, 0)));
}

}  // namespace
}  // namespace tandem::runtime::testing
