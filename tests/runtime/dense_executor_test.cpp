// ModelRunner with a device-style DenseExecutor (the host test double of
// tests/runtime/host_dense_executor.h: the CPU recipe over a block-table-addressed KV mirror)
// against the CPU path: bit-identical logits and routing over batched prefill, decode,
// rewinds and copy-on-write forks, and the errors of the executor path.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/dense_device_plan.h"
#include "engine/runtime/paged_kv_cache.h"
#include "engine/runtime/scheduler.h"
#include "engine/runtime/windowed_kv_cache.h"
#include "tests/runtime/host_dense_executor.h"
#include "tests/runtime/paged_pool.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

// Installs a HostDenseExecutor on `runner` mirroring p.pool; returns it (owned by the runner).
HostDenseExecutor* install(ModelRunner& runner, PagedPool& p, bool q8_0, size_t max_tokens = 512,
                           DeviceWindowRings rings = {}) {
  auto exec = std::make_unique<HostDenseExecutor>(
      runner.spec(), runner.prepared_weights(), *p.pool,
      q8_0 ? kernels::MatmulActivations::kQuantized : kernels::MatmulActivations::kFloat,
      max_tokens, rings);
  HostDenseExecutor* raw = exec.get();
  REQUIRE(runner.set_dense_executor(std::move(exec)).ok());
  return raw;
}

// Runs the same step on both runners (recording routing) and requires bit-identical outputs.
ForwardOutput run_both(ModelRunner& cpu, std::vector<SequenceInput> cpu_batch, ModelRunner& dev,
                       std::vector<SequenceInput> dev_batch) {
  ForwardOutput a, b;
  const ForwardOptions options{.record_routing = true};
  const Status sa = cpu.forward(cpu_batch, a, options);
  const Status sb = dev.forward(dev_batch, b, options);
  INFO(sa.to_string() << " / " << sb.to_string());
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
  REQUIRE(a.n_rows == b.n_rows);
  REQUIRE(a.first_row == b.first_row);
  REQUIRE(!a.logits.empty());
  CHECK(a.logits == b.logits);  // bit for bit
  REQUIRE(a.routing.size() == b.routing.size());
  for (size_t l = 0; l < a.routing.size(); ++l) {
    INFO("layer " << l);
    CHECK(a.routing[l].n_tokens == b.routing[l].n_tokens);
    CHECK(a.routing[l].experts == b.routing[l].experts);
    CHECK(a.routing[l].weights == b.routing[l].weights);
  }
  for (size_t s = 0; s < dev_batch.size(); ++s) {
    CHECK(dev_batch[s].cache->length() == cpu_batch[s].cache->length());
  }
  return b;
}

std::vector<std::vector<int32_t>> tiny_prompts(const std::string& ref_json,
                                               const std::string& dir = tiny_moe_dir()) {
  std::vector<std::vector<int32_t>> prompts;
  const auto ref = read_json(dir + ref_json);
  for (const auto& pr : ref["prompts"]) {
    prompts.push_back(pr["tokens"].get<std::vector<int32_t>>());
  }
  return prompts;
}

std::vector<std::vector<int32_t>> hf_prompts(const std::string& arch) {
  std::vector<std::vector<int32_t>> prompts;
  const auto ref = read_json(hf_dir(arch) + "reference.json");
  for (const auto& p : ref["prompts"]) {
    prompts.push_back(p["prompt"].get<std::vector<int32_t>>());
  }
  return prompts;
}

// Which pool the device side's caches come from, for a model with sliding-window layers: one of
// every layer (plain paged caches), or one of the full layers only, as a scheduler builds it
// (WindowedKvCaches over paged caches of it): with the windowed layers mirrored at the full
// layers' block ids, or in the executor's own window rings. The same for other models.
enum class PoolLayers { kAll, kFullOnly, kFullOnlyRings };

// Window rings for three sequences and a spare, for passes of up to 64 tokens of one sequence.
DeviceWindowRings test_rings(const ModelRunner& runner, size_t block_tokens) {
  const size_t pass = 64;
  return {4, device_window_ring_blocks(runner.kv_layout().window, pass, block_tokens), pass};
}

// Three sequences in one batch: a chunked prefill, a whole prefill with every row's logits and
// one with the last row's; then mixed prefill + decode, greedy decode steps and a rewind, on
// caches whose block ids are not 0, 1, 2, ... (a neighbour holds the first block).
// kv_type: the element type of both sides' caches (the CPU path's own, the device side's pool and
// mirror).
void check_bit_identical(const std::string& path, const std::vector<std::vector<int32_t>>& prompts,
                         size_t bt, bool q8_0, PoolLayers layers = PoolLayers::kAll,
                         kernels::KvType kv_type = kernels::KvType::kF32) {
  REQUIRE(prompts.size() >= 3);
  auto cpu = load_model(path, 2, q8_0, true, kv_type);
  auto dev = load_model(path, 3, q8_0, true, kv_type);
  const bool full_only = layers != PoolLayers::kAll;
  PagedPool p = full_only ? make_full_layer_pool(*dev->runner, bt, 600 / bt + 16)
                          : make_pool(*dev->runner, bt, 600 / bt + 16);
  install(
      *dev->runner, p, q8_0, 512,
      layers == PoolLayers::kFullOnlyRings ? test_rings(*dev->runner, bt) : DeviceWindowRings{});
  PagedKvCache neighbour(*p.pool, *p.allocator, 100, 64);
  REQUIRE(neighbour.prepare_write(0, 1).ok());

  std::vector<std::unique_ptr<KvCache>> cc;
  std::vector<std::unique_ptr<KvCache>> dc;
  for (size_t s = 0; s < 3; ++s) {
    cc.push_back(cpu->runner->new_kv_cache(256));
    auto paged = std::make_unique<PagedKvCache>(*p.pool, *p.allocator, s + 1, 256);
    dc.push_back(full_only ? dev->runner->wrap_kv_cache(std::move(paged), 256) : std::move(paged));
  }
  std::vector<std::vector<int32_t>> seen(3);  // every token each sequence was fed
  auto batch = [&](std::vector<std::pair<size_t, std::vector<int32_t>>>& parts, size_t rewind,
                   LogitsWanted w0, bool dev_side) {
    std::vector<SequenceInput> b;
    for (auto& [s, toks] : parts) {
      KvCache* c = dev_side ? dc[s].get() : cc[s].get();
      const size_t start = c->length() - (s == 1 ? rewind : 0);
      b.push_back(
          {c, toks, start, s == 0 ? w0 : (s == 1 ? LogitsWanted::kAll : LogitsWanted::kLast)});
    }
    return b;
  };
  auto step = [&](std::vector<std::pair<size_t, std::vector<int32_t>>> parts, size_t rewind,
                  LogitsWanted w0) {
    ForwardOutput out = run_both(*cpu->runner, batch(parts, rewind, w0, false), *dev->runner,
                                 batch(parts, rewind, w0, true));
    for (size_t i = 0; i < parts.size(); ++i) {
      auto& [s, toks] = parts[i];
      if (s == 1) seen[s].resize(seen[s].size() - rewind);
      seen[s].insert(seen[s].end(), toks.begin(), toks.end());
    }
    return out;
  };

  const size_t half = prompts[0].size() / 2;
  INFO(path << ", block tokens " << bt << (q8_0 ? ", q8_0 activations" : "")
            << (full_only ? ", pool of the full layers" : "")
            << (layers == PoolLayers::kFullOnlyRings ? " and window rings" : "") << ", KV "
            << kernels::kv_type_name(kv_type));
  REQUIRE(p.pool->type() == kv_type);
  ForwardOutput out =
      step({{0, std::vector<int32_t>(prompts[0].begin(), prompts[0].begin() + half)},
            {1, prompts[1]},
            {2, prompts[2]}},
           0, LogitsWanted::kAll);
  // Prefill's second chunk next to two decode steps.
  std::vector<int32_t> next(3);
  next[1] = argmax(out.row(1, out.n_rows[1] - 1));
  next[2] = argmax(out.row(2, 0));
  out = step({{0, std::vector<int32_t>(prompts[0].begin() + half, prompts[0].end())},
              {1, {next[1]}},
              {2, {next[2]}}},
             0, LogitsWanted::kLast);
  for (int i = 0; i < 5; ++i) {
    INFO("decode step " << i);
    for (size_t s = 0; s < 3; ++s) {
      // No logits for sequence 0 in step 2: it is fed its last token again.
      next[s] = out.n_rows[s] > 0 ? argmax(out.row(s, out.n_rows[s] - 1)) : seen[s].back();
    }
    out = step({{0, {next[0]}}, {1, {next[1]}}, {2, {next[2]}}}, 0,
               i == 2 ? LogitsWanted::kNone : LogitsWanted::kLast);
  }
  // Sequence 1 rewinds two positions and rewrites them (other tokens than before).
  const std::vector<int32_t> redo{seen[1][seen[1].size() - 2], 7};
  out = step({{1, redo}, {2, {next[2]}}}, 2, LogitsWanted::kLast);
  CHECK(dc[1]->length() == seen[1].size());
  CHECK(p.allocator->check_invariants().ok());
}

TEST_CASE("a dense executor gives the CPU path's logits and routing bit for bit (tiny-moe)",
          "[runtime][dense_executor]") {
  for (size_t bt : {size_t{1}, size_t{3}, size_t{16}}) {
    check_bit_identical(tiny_moe_dir() + "tiny-moe-f32.gguf", tiny_prompts("ref-f32.json"), bt,
                        true);
  }
  // Q8_0 weights meet Q8_0 activations in both paths, and float activations in both.
  check_bit_identical(tiny_moe_dir() + "tiny-moe-q8_0.gguf", tiny_prompts("ref-q8_0.json"), 3,
                      true);
  check_bit_identical(tiny_moe_dir() + "tiny-moe-q8_0.gguf", tiny_prompts("ref-q8_0.json"), 16,
                      false);
}

TEST_CASE("a dense executor is bit-identical on the HF models (shared expert, biases, norms)",
          "[runtime][dense_executor]") {
  // Qwen2-MoE: gated shared expert and q/k/v biases; OLMoE: whole-projection Q/K norm; Mixtral:
  // no Q/K norm.
  for (const char* arch : {"qwen2_moe", "olmoe", "mixtral_sharded", "qwen3_moe_bf16"}) {
    check_bit_identical(hf_dir(arch), hf_prompts(arch), 3, true);
  }
}

TEST_CASE("a dense executor is bit-identical on gpt-oss (sinks, sliding windows, biases, YaRN)",
          "[runtime][dense_executor][gpt-oss]") {
  // Windows of 8 over prompts of 52-62 tokens: the windowed layers read the last blocks of each
  // table. A pool of every layer, and the scheduler's pool of the full layers with the windowed
  // layers' host rings beside it (the mirror keeps them at the full layers' block ids).
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  for (size_t bt : {size_t{1}, size_t{3}, size_t{16}}) {
    for (PoolLayers layers :
         {PoolLayers::kAll, PoolLayers::kFullOnly, PoolLayers::kFullOnlyRings}) {
      check_bit_identical(dir + "tiny-gpt-oss-all-f32.gguf", tiny_prompts("ref-all-f32.json", dir),
                          bt, false, layers);
    }
  }
  check_bit_identical(dir + "tiny-gpt-oss-q8_0.gguf", tiny_prompts("ref-q8_0.json", dir), 3, true,
                      PoolLayers::kFullOnlyRings);
  check_bit_identical(hf_dir("gpt_oss_mxfp4"), hf_prompts("gpt_oss_mxfp4"), 3, true,
                      PoolLayers::kFullOnly);
}

TEST_CASE("a dense executor is bit-identical on deepseek2 (MLA over a keys-only pool)",
          "[runtime][dense_executor][deepseek2]") {
  // The latent rows live in a keys-only mirror; both GGUF layouts (split attn_k_b / attn_v_b and
  // the legacy attn_kv_b), Q8_0 with quantized activations, and the HF checkpoints with and
  // without the low-rank query.
  const std::string dir = std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/";
  for (size_t bt : {size_t{1}, size_t{3}, size_t{16}}) {
    check_bit_identical(dir + "tiny-deepseek2-f32.gguf", tiny_prompts("ref-f32.json", dir), bt,
                        false);
  }
  check_bit_identical(dir + "tiny-deepseek2-legacy-f32.gguf",
                      tiny_prompts("ref-legacy-f32.json", dir), 3, false);
  check_bit_identical(dir + "tiny-deepseek2-q8_0.gguf", tiny_prompts("ref-q8_0.json", dir), 3,
                      true);
  for (const char* arch : {"deepseek_v3", "deepseek_v2_lite"}) {
    check_bit_identical(hf_dir(arch), hf_prompts(arch), 3, true);
  }
}

TEST_CASE("a dense executor is bit-identical over an f16 KV pool (GQA, sinks and windows, MLA)",
          "[runtime][dense_executor][kv_type]") {
  // The device mirror keeps the pool's element type: rows rounded to halves when written, read
  // back exactly, as the CPU path's own f16 caches do.
  constexpr kernels::KvType kF16 = kernels::KvType::kF16;
  check_bit_identical(tiny_moe_dir() + "tiny-moe-f32.gguf", tiny_prompts("ref-f32.json"), 3, true,
                      PoolLayers::kAll, kF16);
  const std::string oss = std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
  check_bit_identical(oss + "tiny-gpt-oss-all-f32.gguf", tiny_prompts("ref-all-f32.json", oss), 16,
                      false, PoolLayers::kFullOnlyRings, kF16);
  const std::string ds = std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/";
  check_bit_identical(ds + "tiny-deepseek2-f32.gguf", tiny_prompts("ref-f32.json", ds), 3, false,
                      PoolLayers::kAll, kF16);
}

TEST_CASE("copy-on-write of a forked sequence's shared block reaches the executor's mirror",
          "[runtime][dense_executor]") {
  const std::string path = tiny_moe_dir() + "tiny-moe-f32.gguf";
  const auto prompt = tiny_prompts("ref-f32.json")[0];
  REQUIRE(prompt.size() % 3 != 0);  // the last block is partial, so the fork shares it
  auto cpu = load_model(path);
  auto dev = load_model(path);
  PagedPool pc = make_pool(*cpu->runner, 3, 200);
  PagedPool pd = make_pool(*dev->runner, 3, 200);
  HostDenseExecutor* exec = install(*dev->runner, pd, true);
  PagedKvCache cparent(*pc.pool, *pc.allocator, 1, 256);
  PagedKvCache dparent(*pd.pool, *pd.allocator, 1, 256);
  run_both(*cpu->runner, {{&cparent, prompt, 0, LogitsWanted::kLast}}, *dev->runner,
           {{&dparent, prompt, 0, LogitsWanted::kLast}});
  REQUIRE(pc.allocator->fork(1, 2).ok());
  REQUIRE(pd.allocator->fork(1, 2).ok());
  PagedKvCache cchild(*pc.pool, *pc.allocator, 2, 256);
  PagedKvCache dchild(*pd.pool, *pd.allocator, 2, 256);
  cchild.set_length(prompt.size());
  dchild.set_length(prompt.size());
  // Both append a different token: each writes into the shared partial block, so the allocator
  // hands each a private copy first (through the hook on the executor's side).
  const std::vector<int32_t> a{5}, b{9};
  for (int i = 0; i < 3; ++i) {
    INFO("step " << i);
    run_both(*cpu->runner,
             {{&cparent, a, cparent.length(), LogitsWanted::kLast},
              {&cchild, b, cchild.length(), LogitsWanted::kLast}},
             *dev->runner,
             {{&dparent, a, dparent.length(), LogitsWanted::kLast},
              {&dchild, b, dchild.length(), LogitsWanted::kLast}});
  }
  CHECK(exec->copies >= 1);
  CHECK(pd.allocator->check_invariants().ok());
}

TEST_CASE("MoE timings keep counting with a dense executor", "[runtime][dense_executor]") {
  auto dev = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
  PagedPool p = make_pool(*dev->runner, 16, 32);
  install(*dev->runner, p, true);
  experts::MoeLayerTimings timings;
  dev->runner->set_moe_timings(&timings);
  PagedKvCache cache(*p.pool, *p.allocator, 1, 256);
  const std::vector<int32_t> ids{1, 2, 3, 4};
  SequenceInput seq{&cache, ids, 0, LogitsWanted::kLast};
  ForwardOutput out;
  REQUIRE(dev->runner->forward({&seq, 1}, out).ok());
  REQUIRE(timings.layers.size() == dev->runner->spec().n_layers);
  for (const auto& layer : timings.layers) {
    CHECK(layer.calls == 1);
    CHECK(layer.tokens == ids.size());
  }
}

TEST_CASE("the executor path rejects caches it cannot address and reports its errors",
          "[runtime][dense_executor]") {
  const std::string path = tiny_moe_dir() + "tiny-moe-f32.gguf";
  auto cpu = load_model(path);
  auto dev = load_model(path);
  PagedPool p = make_pool(*dev->runner, 3, 100);
  HostDenseExecutor* exec = install(*dev->runner, p, true, 8);
  const std::vector<int32_t> ids{1, 2, 3, 4, 5};
  ForwardOutput out;

  SECTION("a dense (contiguous) cache names its sequence") {
    PagedKvCache paged(*p.pool, *p.allocator, 1, 64);
    auto dense = dev->runner->new_kv_cache();
    std::vector<SequenceInput> batch{{&paged, ids, 0, LogitsWanted::kLast},
                                     {dense.get(), ids, 0, LogitsWanted::kLast}};
    const Status s = dev->runner->forward(batch, out);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find("sequence 1") != std::string::npos);
    CHECK(paged.length() == 0);
    CHECK(p.allocator->free_blocks() == p.allocator->total_blocks());  // nothing taken
  }
  SECTION("a paged cache of another pool") {
    PagedPool other = make_pool(*dev->runner, 3, 100);
    PagedKvCache paged(*other.pool, *other.allocator, 1, 64);
    SequenceInput seq{&paged, ids, 0, LogitsWanted::kLast};
    CHECK(dev->runner->forward({&seq, 1}, out).code() == StatusCode::kInvalidArgument);
  }
  SECTION("a batch beyond max_batch_tokens") {
    PagedKvCache c0(*p.pool, *p.allocator, 1, 64);
    PagedKvCache c1(*p.pool, *p.allocator, 2, 64);
    std::vector<SequenceInput> batch{{&c0, ids, 0, LogitsWanted::kLast},
                                     {&c1, ids, 0, LogitsWanted::kLast}};
    const Status s = dev->runner->forward(batch, out);
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find("10 tokens") != std::string::npos);
    CHECK(p.allocator->free_blocks() == p.allocator->total_blocks());
  }
  SECTION("an executor failure mid-pass leaves the length; a rerun gives the CPU logits") {
    for (const char* call : {"begin", "attention 1", "moe_input 0", "moe_output 1", "logits"}) {
      INFO(call);
      PagedKvCache paged(*p.pool, *p.allocator, 1, 64);
      exec->fail_at = call;
      SequenceInput seq{&paged, ids, 0, LogitsWanted::kAll};
      const Status s = dev->runner->forward({&seq, 1}, out);
      CHECK(s.code() == StatusCode::kInternal);
      CHECK(paged.length() == 0);
      exec->fail_at.clear();
      auto dense = cpu->runner->new_kv_cache();
      run_both(*cpu->runner, {{dense.get(), ids, 0, LogitsWanted::kAll}}, *dev->runner,
               {{&paged, ids, 0, LogitsWanted::kAll}});
    }
  }
  SECTION("a failed copy-on-write copy fails the forward") {
    PagedKvCache parent(*p.pool, *p.allocator, 1, 64);
    SequenceInput seq{&parent, ids, 0, LogitsWanted::kLast};
    REQUIRE(dev->runner->forward({&seq, 1}, out).ok());
    REQUIRE(p.allocator->fork(1, 2).ok());
    PagedKvCache child(*p.pool, *p.allocator, 2, 64);
    child.set_length(ids.size());
    exec->fail_at = "copy_block";
    const std::vector<int32_t> one{3};
    SequenceInput step{&child, one, child.length(), LogitsWanted::kLast};
    CHECK(dev->runner->forward({&step, 1}, out).code() == StatusCode::kInternal);
    CHECK(child.length() == ids.size());
  }
  SECTION("an executor for a pool of another shape is refused; null returns to the CPU") {
    PagedPool wrong = make_pool(*dev->runner, 3, 10, dev->runner->spec().kv_dim() + 1);
    auto bad =
        std::make_unique<HostDenseExecutor>(dev->runner->spec(), dev->runner->prepared_weights(),
                                            *wrong.pool, kernels::MatmulActivations::kQuantized, 8);
    CHECK(dev->runner->set_dense_executor(std::move(bad)).code() == StatusCode::kInvalidArgument);
    CHECK(dev->runner->dense_executor() == exec);  // unchanged
    // The host executor mirrors no pool: it is the runner's own, never a device executor.
    auto host =
        std::make_unique<CpuDenseExecutor>(dev->runner->spec(), dev->runner->prepared_weights(),
                                           nullptr, kernels::MatmulActivations::kQuantized);
    const Status s = dev->runner->set_dense_executor(std::move(host));
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK(s.message().find("mirrors a KV pool") != std::string::npos);
    CHECK(dev->runner->dense_executor() == exec);
    REQUIRE(dev->runner->set_dense_executor(nullptr).ok());
    auto c1 = cpu->runner->new_kv_cache();
    auto c2 = dev->runner->new_kv_cache();
    run_both(*cpu->runner, {{c1.get(), ids, 0, LogitsWanted::kAll}}, *dev->runner,
             {{c2.get(), ids, 0, LogitsWanted::kAll}});
  }
}

TEST_CASE("a scheduler whose runner has a dense executor reproduces llama.cpp's greedy tokens",
          "[runtime][dense_executor][scheduler]") {
  // Chunked prefill (5-token chunks), three sequences per batch and a KV budget of 12 blocks of 4
  // positions: the loop preempts and recomputes, and every KV row lives in the executor's mirror.
  const auto ref = read_json(tiny_moe_dir() + "ref-f32.json");
  auto m = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
  SchedulerOptions options;
  options.limits.max_batch_tokens = 16;
  options.limits.prefill_chunk_tokens = 5;
  options.limits.max_running = 3;
  options.limits.context_length = 40;
  options.kv_blocks = 12;
  options.kv_block_tokens = 4;
  auto s = Scheduler::create(std::move(m->runner), options);
  INFO((s.ok() ? "" : s.status().to_string()));
  REQUIRE(s.ok());
  Scheduler& sched = **s;
  ModelRunner& runner = sched.runner();
  auto exec =
      std::make_unique<HostDenseExecutor>(runner.spec(), runner.prepared_weights(), sched.kv_pool(),
                                          kernels::MatmulActivations::kQuantized, 16);
  HostDenseExecutor* raw = exec.get();
  REQUIRE(runner.set_dense_executor(std::move(exec)).ok());
  std::vector<RequestHandle> handles;
  std::vector<std::vector<int32_t>> want;
  for (const auto& pr : ref["prompts"]) {
    auto ids = pr["tokens"].get<std::vector<int32_t>>();
    if (ids.size() > 24) continue;  // fits the 40-position context with 12 new tokens
    auto greedy = pr["greedy_tokens"].get<std::vector<int32_t>>();
    greedy.resize(12);
    want.push_back(greedy);
    Request r;
    r.id = pr["name"].get<std::string>();
    r.prompt_token_ids = ids;
    r.sampling.temperature = 0.0f;
    r.sampling.ignore_eos = true;
    r.sampling.max_tokens = 12;
    auto h = sched.submit(std::move(r));
    REQUIRE(h.ok());
    handles.push_back(std::move(h).value());
  }
  REQUIRE(handles.size() >= 2);
  REQUIRE(sched.start().ok());
  for (size_t i = 0; i < handles.size(); ++i) {
    INFO("request " << i);
    std::vector<int32_t> got;
    Status error;
    while (!handles[i].done()) {
      auto ev = handles[i].next(std::chrono::milliseconds(120000));
      REQUIRE(ev.has_value());
      got.insert(got.end(), ev->token_ids.begin(), ev->token_ids.end());
      if (ev->is_final) error = ev->error;
    }
    CHECK(error.ok());
    CHECK(got == want[i]);
  }
  sched.stop();
  CHECK(sched.preemptions() > 0);
  CHECK(raw->passes == static_cast<size_t>(sched.steps()));  // every step ran on the executor
  CHECK(raw->copies == 0);                                   // no forks in the scheduler
  CHECK(sched.kv_check_invariants().ok());
}

uint64_t aligned(uint64_t n) {
  return (n + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
}

// The checkpoint's bytes of every dense tensor but the token embedding (norms and biases of a
// non-F32 file would be converted to float; the fixtures below are F32 or Q8_0 with F32 vectors).
uint64_t dense_file_bytes(const model::ModelWeights& w) {
  uint64_t sum = 0;
  auto add = [&](const model::TensorInfo* t) {
    if (t != nullptr) sum += aligned(t->data.size());
  };
  add(w.output_norm);
  add(w.lm_head);
  for (const model::LayerWeights& l : w.layers) {
    for (const model::TensorInfo* t : l.dense_tensors()) add(t);
  }
  return sum;
}

TEST_CASE("the CUDA dense memory estimate needs no device and counts every kind",
          "[runtime][dense_executor][estimate]") {
  for (const std::string& path : {tiny_moe_dir() + "tiny-moe-f32.gguf",
                                  tiny_moe_dir() + "tiny-moe-q8_0.gguf", hf_dir("qwen2_moe")}) {
    INFO(path);
    auto m = load_model(path);
    const model::ModelSpec& spec = *m->checkpoint.spec;
    const model::ModelWeights& w = *m->checkpoint.weights;
    const KvGeometry kv{spec.n_layers, spec.kv_dim(), 16, 40};
    auto small = estimate_cuda_dense_bytes(spec, w, kv, 64);
    auto large = estimate_cuda_dense_bytes(spec, w, kv, 128);
    INFO((small.ok() ? "" : small.status().to_string()));
    REQUIRE(small.ok());
    REQUIRE(large.ok());
    // Weights: the file's dense tensors (not the embedding), each padded to 256 bytes.
    CHECK(small->dense_weights == dense_file_bytes(w));
    CHECK(small->dense_weights < w.token_embedding->data.size() + dense_file_bytes(w));
    // KV: K and V, every layer, every block, exactly.
    CHECK(small->kv == 2 * spec.n_layers * 40 * 16 * spec.kv_dim() * sizeof(float));
    CHECK(large->dense_weights == small->dense_weights);
    CHECK(large->kv == small->kv);
    // Scratch: per token at least x, h, ffn, shared out [hidden], q and attention out [q_dim],
    // k and v [kv_dim], router logits, gate logit and 4 int32 indices; the logits chunk (32 rows)
    // is the same for both; the difference is 64 tokens' worth, up to region padding.
    const uint64_t per_token =
        4 * (4 * spec.hidden_size + 2 * spec.q_dim() + 2 * spec.kv_dim() + spec.n_experts + 1) +
        4 * 5;  // 4 index arrays + one block-table entry per token
    const uint64_t diff = large->scratch - small->scratch;
    CHECK(diff >= 64 * per_token);
    CHECK(diff <= 64 * per_token + 64 * 4 * 2 * 2048 + 20 * kDeviceAlign);  // + ffn regions
    CHECK(small->total() == small->dense_weights + small->kv + small->scratch);
    // An f16 pool's mirror: half the KV bytes, nothing else changes.
    const KvGeometry kv16{spec.n_layers, spec.kv_dim(), 16, 40, kernels::KvType::kF16};
    auto half = estimate_cuda_dense_bytes(spec, w, kv16, 64);
    REQUIRE(half.ok());
    CHECK(half->kv == small->kv / 2);
    CHECK(half->dense_weights == small->dense_weights);
    CHECK(half->scratch == small->scratch);
  }
  auto m = load_model(tiny_moe_dir() + "tiny-moe-f32.gguf");
  const model::ModelSpec& spec = *m->checkpoint.spec;
  const model::ModelWeights& w = *m->checkpoint.weights;
  CHECK(estimate_cuda_dense_bytes(spec, w, {spec.n_layers, spec.kv_dim(), 16, 40}, 0)
            .status()
            .code() == StatusCode::kInvalidArgument);
  CHECK(estimate_cuda_dense_bytes(spec, w, {spec.n_layers, spec.kv_dim() + 1, 16, 40}, 8)
            .status()
            .code() == StatusCode::kInvalidArgument);
  CHECK(estimate_cuda_dense_bytes(spec, w, {spec.n_layers, spec.kv_dim(), 16, size_t{1} << 62}, 8)
            .status()
            .code() == StatusCode::kInvalidArgument);
}

TEST_CASE(
    "the CUDA dense estimate of a model with windows: the pool's full layers, every layer "
    "mirrored",
    "[runtime][dense_executor][estimate][gpt-oss]") {
  auto m = load_model(std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/tiny-gpt-oss-f32.gguf");
  const model::ModelSpec& spec = *m->checkpoint.spec;
  const model::ModelWeights& w = *m->checkpoint.weights;
  const size_t n_full = KvLayerLayout::of(spec).n_full;
  REQUIRE(n_full > 0);
  REQUIRE(n_full < spec.n_layers);
  const uint64_t want_kv = 2 * spec.n_layers * 40 * 16 * spec.kv_dim() * sizeof(float);
  for (size_t pool_layers : {n_full, spec.n_layers}) {
    INFO("pool of " << pool_layers << " layers");
    auto est = estimate_cuda_dense_bytes(spec, w, {pool_layers, spec.kv_dim(), 16, 40}, 64);
    INFO((est.ok() ? "" : est.status().to_string()));
    REQUIRE(est.ok());
    CHECK(est->kv == want_kv);  // the windowed layers keep every position on the device
  }
  const auto other =
      estimate_cuda_dense_bytes(spec, w, {spec.n_layers + 1, spec.kv_dim(), 16, 40}, 64);
  CHECK(other.status().code() == StatusCode::kInvalidArgument);
  CHECK(other.status().message().find("full layers") != std::string::npos);
  CHECK(dense_executor_unsupported(spec).empty());

  // With window rings: the mirror holds the pool's full layers, the rings the windowed ones
  // (slots x blocks each), after the mirror in the same allocation.
  const size_t rb = device_window_ring_blocks(spec.sliding_window, 16, 16);
  const DeviceWindowRings rings{5, rb, 16};
  auto ringed =
      plan_dense_device(spec, w, {n_full, spec.kv_dim(), 16, 40, kernels::KvType::kF16, rings}, 64);
  REQUIRE(ringed.ok());
  const uint64_t row = spec.kv_dim() * 2;  // f16
  CHECK(ringed->mirror_plane_bytes == 40 * 16 * row);
  CHECK(ringed->ring_plane_bytes == 5 * rb * 16 * row);
  CHECK(ringed->kv_ring_offset == 2 * n_full * 40 * 16 * row);
  CHECK(ringed->bytes.kv ==
        ringed->kv_ring_offset + 2 * (spec.n_layers - n_full) * 5 * rb * 16 * row);
  // Rings need the pool of the full layers.
  const auto every = estimate_cuda_dense_bytes(
      spec, w, {spec.n_layers, spec.kv_dim(), 16, 40, kernels::KvType::kF32, rings}, 64);
  CHECK(every.status().code() == StatusCode::kInvalidArgument);
  // Rings smaller than a window plus a pass (a pass would overwrite what it then reads).
  const size_t need = device_window_ring_blocks(spec.sliding_window, 64, 16);
  REQUIRE(need > 1);
  const auto small = estimate_cuda_dense_bytes(
      spec, w,
      {n_full, spec.kv_dim(), 16, 40, kernels::KvType::kF32, DeviceWindowRings{2, need - 1, 64}},
      64);
  CHECK(small.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(small.status().message(), Catch::Contains("too small"));
  CHECK(estimate_cuda_dense_bytes(
            spec, w,
            {n_full, spec.kv_dim(), 16, 40, kernels::KvType::kF32, DeviceWindowRings{2, need, 64}},
            64)
            .ok());
}

TEST_CASE("window rings: leased per sequence, refused where they cannot address a sequence",
          "[runtime][dense_executor][gpt-oss]") {
  const std::string path =
      std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/tiny-gpt-oss-all-f32.gguf";
  auto dev = load_model(path, 1, false);
  ModelRunner& runner = *dev->runner;
  // A pool of every layer cannot take rings.
  PagedPool all = make_pool(runner, 16, 40);
  auto exec = std::make_unique<HostDenseExecutor>(runner.spec(), runner.prepared_weights(),
                                                  *all.pool, kernels::MatmulActivations::kFloat,
                                                  512, DeviceWindowRings{2, 5, 8});
  CHECK(runner.set_dense_executor(std::move(exec)).code() == StatusCode::kInvalidArgument);

  PagedPool p = make_full_layer_pool(runner, 16, 40);
  const DeviceWindowRings rings{2, device_window_ring_blocks(runner.kv_layout().window, 8, 16), 8};
  install(runner, p, false, 512, rings);
  auto wrap = [&](SeqId id) {
    return runner.wrap_kv_cache(std::make_unique<PagedKvCache>(*p.pool, *p.allocator, id, 256),
                                256);
  };
  auto a = wrap(1);
  auto b = wrap(2);
  auto c = wrap(3);  // both slots held: none for this one
  CHECK(dynamic_cast<WindowedKvCache&>(*a).device_ring() == 0);
  CHECK(dynamic_cast<WindowedKvCache&>(*b).device_ring() == 1);
  CHECK(dynamic_cast<WindowedKvCache&>(*c).device_ring() == -1);
  const std::vector<int32_t> tokens{1, 2, 3, 4};
  ForwardOutput out;
  SequenceInput in{c.get(), tokens, 0, LogitsWanted::kLast};
  Status st = runner.forward({&in, 1}, out);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("rings") != std::string::npos);
  // A slot returns with its cache.
  b.reset();
  // A cache the executor cannot address (the runner's own dense cache) takes no slot, free or not.
  CHECK(dynamic_cast<WindowedKvCache&>(*runner.new_kv_cache(64)).device_ring() == -1);
  auto d = wrap(4);
  CHECK(dynamic_cast<WindowedKvCache&>(*d).device_ring() == 1);
  in.cache = d.get();
  REQUIRE(runner.forward({&in, 1}, out).ok());
  // Decoding on around each ring several times (3 blocks of 16 positions for passes of 8 with a
  // window of 8): the CPU path's logits, bit for bit.
  REQUIRE(rings.blocks * 16 < 100);
  auto cpu = load_model(path, 1, false);
  auto cpu_cache = cpu->runner->new_kv_cache(256);
  SequenceInput cpu_in{cpu_cache.get(), tokens, 0, LogitsWanted::kLast};
  ForwardOutput want;
  REQUIRE(cpu->runner->forward({&cpu_in, 1}, want).ok());
  CHECK(out.logits == want.logits);
  for (size_t step = 0; step < 150; ++step) {
    INFO("decode step " << step);
    const std::vector<int32_t> next{argmax(want.row(0, 0))};
    SequenceInput a_in{d.get(), next, d->length(), LogitsWanted::kLast};
    SequenceInput b_in{cpu_cache.get(), next, cpu_cache->length(), LogitsWanted::kLast};
    REQUIRE(runner.forward({&a_in, 1}, out).ok());
    REQUIRE(cpu->runner->forward({&b_in, 1}, want).ok());
    REQUIRE(out.logits == want.logits);
  }
  // More tokens of one sequence in a pass than the rings were sized for.
  const std::vector<int32_t> nine(9, 5);
  SequenceInput long_in{a.get(), nine, 0, LogitsWanted::kLast};
  st = runner.forward({&long_in, 1}, out);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("exceed the window rings") != std::string::npos);
}

TEST_CASE("the CUDA dense estimate of an MLA model: a keys-only mirror, the per-head matrices",
          "[runtime][dense_executor][estimate][deepseek2]") {
  for (const char* file : {"tiny-deepseek2-f32.gguf", "tiny-deepseek2-legacy-f32.gguf"}) {
    INFO(file);
    auto m = load_model(std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/" + file);
    const model::ModelSpec& spec = *m->checkpoint.spec;
    const model::ModelWeights& w = *m->checkpoint.weights;
    REQUIRE(spec.kv_value_dim() == 0);
    CHECK(dense_executor_unsupported(spec).empty());
    auto plan = plan_dense_device(spec, w, {spec.n_layers, spec.kv_dim(), 16, 40}, 64);
    INFO((plan.ok() ? "" : plan.status().to_string()));
    REQUIRE(plan.ok());
    CHECK(plan->bytes.kv == spec.n_layers * 40 * 16 * spec.kv_dim() * sizeof(float));
    CHECK(cuda_dense_unsupported_tensor(*plan).empty());
    // Every layer's k_b and v_b: heads x (kv_lora x nope) and heads x (v_head x kv_lora).
    const model::MlaSpec& mla = spec.mla;
    for (const DeviceLayerRefs& l : plan->layers) {
      REQUIRE(l.k_b.present());
      REQUIRE(l.v_b.present());
      CHECK(l.k_b.rows == mla.kv_lora_rank);
      CHECK(l.k_b.cols == mla.qk_nope_dim);
      CHECK(l.v_b.rows == mla.v_head_dim);
      CHECK(l.v_b.cols == mla.kv_lora_rank);
    }
    size_t head_uploads = 0;
    for (const DeviceUpload& u : plan->uploads) {
      if (u.name.find(" head ") != std::string::npos) ++head_uploads;
    }
    CHECK(head_uploads == 2 * spec.n_layers * spec.n_heads);
  }
}

TEST_CASE(
    "a layout-only dense plan has the bytes, offsets and types of the real one, not its floats",
    "[runtime][dense_executor][estimate][deepseek2]") {
  for (const char* file : {"tiny-deepseek2-f32.gguf", "tiny-deepseek2-legacy-f32.gguf",
                           "tiny-deepseek2-q4_k_m.gguf"}) {
    INFO(file);
    auto m = load_model(std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/" + file);
    const model::ModelSpec& spec = *m->checkpoint.spec;
    const model::ModelWeights& w = *m->checkpoint.weights;
    const KvGeometry kv{spec.n_layers, spec.kv_dim(), 16, 40};
    auto full = plan_dense_device(spec, w, kv, 64);
    auto layout = plan_dense_device(spec, w, kv, 64, PrepareUse::kLayout);
    REQUIRE(full.ok());
    REQUIRE(layout.ok());
    CHECK(layout->bytes.total() == full->bytes.total());
    CHECK(layout->bytes.dense_weights == full->bytes.dense_weights);
    CHECK(layout->pinned_bytes == full->pinned_bytes);
    REQUIRE(layout->uploads.size() == full->uploads.size());
    const bool legacy = spec.mla.split_kv_b == false;
    size_t without_data = 0;
    for (size_t i = 0; i < full->uploads.size(); ++i) {
      const DeviceUpload& a = full->uploads[i];
      const DeviceUpload& b = layout->uploads[i];
      INFO(a.name);
      CHECK(b.name == a.name);
      CHECK(b.offset == a.offset);
      CHECK(b.bytes == a.bytes);
      CHECK(b.type == a.type);
      CHECK(b.cols == a.cols);
      REQUIRE(a.host != nullptr);
      if (b.host == nullptr) {
        ++without_data;
      } else {
        // Views into the checkpoint are the same views; float copies of vectors are new copies
        // of the same values.
        CHECK(std::equal(static_cast<const uint8_t*>(a.host),
                         static_cast<const uint8_t*>(a.host) + a.bytes,
                         static_cast<const uint8_t*>(b.host)));
      }
    }
    // Only the legacy layout's F32 key heads are left unmade: one per head and layer.
    CHECK(without_data == (legacy ? spec.n_layers * spec.n_heads : 0));
    for (const PreparedLayer& L : layout->prepared.layers) CHECK(L.mla_owned.empty());
    CHECK(cuda_dense_unsupported_tensor(*layout) == cuda_dense_unsupported_tensor(*full));
    auto estimate = estimate_cuda_dense_bytes(spec, w, kv, 64);
    REQUIRE(estimate.ok());
    CHECK(estimate->total() == full->bytes.total());
  }
}

}  // namespace
}  // namespace tandem::runtime::testing
