// Benchmark: the CPU matmul kernel variants (scalar, AVX2, AVX-512, AVX-512 VNNI) on an expert's
// gate matrix (768 x 2048), one thread, for every weight type of the kernel table on its quantized
// and float paths (and, for types with one, on the interleaved layout: "<type>_x8_x_<format>").
// Reports weight GB/s and GFLOP/s (2 * rows * cols * tokens per call); the matrix stays in cache,
// so this times the kernels, not DRAM. Compare variants within one run. BM_MatmulStream is the
// same for one to four and eight tokens on a 256 MiB matrix (2048 columns) that streams from
// memory, with one thread and with two (each its own matrix; the counters are their sum over wall
// time), beside BM_ReadStream, a plain read of as many bytes per thread: how close each kernel
// comes to what the threads can read (with more tokens, whether the kernel still keeps up with
// memory). Decode and few-token expert tiles stream this way, one matrix per thread.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_dispatch.h"
#include "kernels/cpu/weight_type_table.h"

namespace tandem::kernels {
namespace {

constexpr size_t kRows = 768;
constexpr size_t kCols = 2048;
constexpr size_t kStreamBytes = size_t{256} << 20;

struct Case {
  TensorType type;
  MatmulActivations mode;
  std::string name;
  // The matrix's layout: kRows, or one of its type's interleaved layouts.
  WeightLayout layout = WeightLayout::kRows;
};

// The byte offsets of a block's fp16 scales (or MXFP4's exponent byte), set to sane values so that
// random quant bytes never decode to NaN or subnormal scales (which would time something else).
std::vector<size_t> scale_offsets(TensorType type) {
  switch (type) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      return {0, 2};
    case TensorType::kQ2_K:
      return {80, 82};
    case TensorType::kQ3_K:
      return {108};
    case TensorType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

// Random weight bytes of `type`: normal floats for the float types; random quant bytes with
// scales of 0.01 (MXFP4: exponent 120) for block types.
std::vector<uint8_t> random_bytes(TensorType type, size_t rows, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t n = rows * kCols;
  const TensorTypeTraits traits = *tensor_type_traits(type);
  std::vector<uint8_t> bytes(n / traits.block_elements * traits.block_bytes);
  if (traits.block_elements == 1) {
    for (size_t i = 0; i < n; ++i) {
      const float f = normal(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      const uint16_t h = type == TensorType::kF16 ? fp32_to_fp16_bits(f) : bits >> 16;
      if (type == TensorType::kF32 || type == TensorType::kF64) {
        std::memcpy(bytes.data() + i * traits.block_bytes, &f, 4);
      } else {
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    }
    return bytes;
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  const uint16_t scale = fp32_to_fp16_bits(0.01f);
  for (size_t b = 0; b < bytes.size(); b += traits.block_bytes) {
    if (type == TensorType::kMXFP4) {
      bytes[b] = 120;
      continue;
    }
    if (type == TensorType::kF8_E4M3_B128) {  // a float32 scale; codes of the layout (no NaN)
      const float s = 0.01f;
      std::memcpy(bytes.data() + b, &s, 4);
      for (size_t j = 4; j < traits.block_bytes; ++j) {
        if ((bytes[b + j] & 0x7f) == 0x7f) bytes[b + j] ^= 1;
      }
      continue;
    }
    for (size_t off : scale_offsets(type)) std::memcpy(bytes.data() + b + off, &scale, 2);
  }
  return bytes;
}

// Rows of a kCols-column `type` matrix of about kStreamBytes.
size_t stream_rows(TensorType type) {
  return kStreamBytes / *tensor_type_bytes(type, kCols) / 8 * 8;
}

void run(benchmark::State& state, MatmulVariant variant, Case c, bool stream) {
  const size_t n_tokens = static_cast<size_t>(state.range(0));
  const size_t rows = stream ? stream_rows(c.type) : kRows;
  std::mt19937 rng(1);
  const std::vector<uint8_t> bytes = random_bytes(c.type, rows, rng);
  Result<WeightMatrix> w = make_weight_matrix(c.type, bytes, rows, kCols);
  if (!w.ok()) {
    state.SkipWithError(w.status().message().c_str());
    return;
  }
  std::vector<uint8_t> interleaved;
  if (c.layout != WeightLayout::kRows) {
    interleaved.resize(interleaved_bytes(*w));
    *w = interleave_rows8(*w, interleaved, c.layout);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n_tokens * kCols);
  for (float& f : x) f = normal(rng);
  std::vector<float> y(n_tokens * rows);
  // The variant is process-wide: with two threads the first sets and restores it (every thread
  // enters and leaves the timed loop together).
  const bool first = state.thread_index() == 0;
  const MatmulVariant saved = active_matmul_variant();
  if (first) set_matmul_variant(variant);
  for (auto _ : state) {
    matmul(*w, x, n_tokens, y, c.mode);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  if (first) set_matmul_variant(saved);
  const double weight_bytes = static_cast<double>(bytes.size());
  state.counters["weight_GB/s"] = benchmark::Counter(
      weight_bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(rows) * kCols * static_cast<double>(n_tokens) *
                             static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// A plain read of kStreamBytes (the sum of its 64-bit words), the reference for BM_MatmulStream.
void read_stream(benchmark::State& state) {
  std::vector<uint64_t> words(kStreamBytes / sizeof(uint64_t), 1);
  for (auto _ : state) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < words.size(); i += 4) {
      a += words[i];
      b += words[i + 1];
      c += words[i + 2];
      d += words[i + 3];
    }
    benchmark::DoNotOptimize(a + b + c + d);
  }
  state.counters["GB/s"] = benchmark::Counter(
      static_cast<double>(kStreamBytes) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

void register_all() {
  // Every weight type of the kernel table, on its quantized path where it has one and on the float
  // path.
  std::vector<Case> cases;
  for (const WeightTypeKernels& row : weight_type_table()) {
    const std::string name(tensor_type_name(row.type));
    if (row.activations != ActivationFormat::kF32) {
      const std::string format(activation_format_name(row.activations));
      cases.push_back({row.type, MatmulActivations::kQuantized, name + "_x_" + format});
      if (row.interleaved_x8.repack != nullptr) {
        cases.push_back({row.type, MatmulActivations::kQuantized, name + "_x8_x_" + format,
                         WeightLayout::kInterleaved8});
      }
      if (row.row_quads.repack != nullptr) {
        cases.push_back({row.type, MatmulActivations::kQuantized, name + "_quads_x_" + format,
                         WeightLayout::kRowQuads8});
      }
    }
    cases.push_back({row.type, MatmulActivations::kFloat, name + "_float"});
  }
  for (const Case& c : cases) {
    for (MatmulVariant v : kMatmulVariants) {
      if (!matmul_variant_supported(v)) continue;
      const std::string name =
          std::string("BM_Matmul/") + c.name + "/" + std::string(matmul_variant_name(v));
      benchmark::RegisterBenchmark(name.c_str(), run, v, c, false)
          ->ArgName("tokens")
          ->Arg(1)
          ->Arg(2)
          ->Arg(3)
          ->Arg(4)
          ->Arg(8)
          ->Arg(12)
          ->Arg(16)
          ->Arg(24)
          ->Arg(40)
          ->Arg(64)
          ->Arg(128)
          ->Unit(benchmark::kMicrosecond);
      if (c.mode == MatmulActivations::kQuantized && v != MatmulVariant::kScalar) {
        const std::string stream =
            std::string("BM_MatmulStream/") + c.name + "/" + std::string(matmul_variant_name(v));
        benchmark::RegisterBenchmark(stream.c_str(), run, v, c, true)
            ->ArgName("tokens")
            ->Arg(1)
            ->Arg(2)
            ->Arg(3)
            ->Arg(4)
            ->Arg(8)
            ->Threads(1)
            ->Threads(2)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::RegisterBenchmark("BM_ReadStream", read_stream)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace tandem::kernels

int main(int argc, char** argv) {
  tandem::kernels::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
