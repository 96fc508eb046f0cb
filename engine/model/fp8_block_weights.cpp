// FP8 block-quantized weights to kF8_E4M3_B128 at open: checks, then the re-layout on every core.
#include "engine/model/fp8_block_weights.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "kernels/cpu/float_convert.h"

namespace tandem::model {

namespace {

static_assert(std::endian::native == std::endian::little, "block scales are written in place");

constexpr uint64_t kBlock = 128;              // kF8_E4M3_B128 elements per block
constexpr uint64_t kBlockBytes = 4 + kBlock;  // float32 scale + codes
// The SIMD kernels take the scale times 2^8 (matmul_x86_avx2_impl.h); below 2^7 that is exact
// and leaves room.
constexpr float kMaxScale = 0x1p7f;

// One weight to convert: its tensors, its checked scales as float, and where its output goes.
struct Job {
  const TensorInfo* weight = nullptr;
  const TensorInfo* scale = nullptr;
  std::vector<float> scales;  // [row blocks, col blocks]
  uint64_t rows = 0;
  uint64_t cols = 0;
  std::string problem;  // a NaN code found while converting
};

// The scales of `t` (F32 or BF16) as float.
std::vector<float> scale_values(const TensorInfo& t) {
  std::vector<float> out(t.n_elements);
  for (uint64_t i = 0; i < t.n_elements; ++i) {
    if (t.type == TensorType::kF32) {
      out[i] = std::bit_cast<float>(kernels::load_le32(t.data.data() + 4 * i));
    } else {
      out[i] = kernels::bf16_to_fp32(kernels::load_le16(t.data.data() + 2 * i));
    }
  }
  return out;
}

// Writes the blocks of `job` into `out` (rows * cols / 128 blocks); notes the first NaN code.
void convert(const Fp8BlockConfig& config, Job& job, uint8_t* out) {
  const uint64_t col_blocks = job.cols / kBlock;
  const uint64_t scale_cols = job.scale->shape[1];
  const uint8_t* codes = job.weight->data.data();
  for (uint64_t r = 0; r < job.rows; ++r) {
    const float* scale_row = job.scales.data() + (r / config.block_rows) * scale_cols;
    for (uint64_t b = 0; b < col_blocks; ++b, out += kBlockBytes) {
      const uint64_t c0 = b * kBlock;
      const float s = scale_row[c0 / config.block_cols];
      std::memcpy(out, &s, 4);
      const uint8_t* src = codes + r * job.cols + c0;
      std::memcpy(out + 4, src, kBlock);
      if (!job.problem.empty()) continue;
      for (uint64_t j = 0; j < kBlock; ++j) {
        if ((src[j] & 0x7fu) == 0x7fu) {
          job.problem = job.weight->name + ": NaN code 0x" + (src[j] == 0xff ? "FF" : "7F") +
                        " at row " + std::to_string(r) + ", column " + std::to_string(c0 + j);
          break;
        }
      }
    }
  }
}

}  // namespace

std::string fp8_scale_name(const std::string& weight_name) {
  return weight_name + "_scale_inv";
}

Result<std::optional<Fp8BlockConfig>> fp8_block_config(const nlohmann::json& config) {
  const auto q = config.find("quantization_config");
  if (q == config.end() || !q->is_object()) return std::optional<Fp8BlockConfig>();
  const auto method = q->find("quant_method");
  if (method == q->end() || !method->is_string() || method->get<std::string>() != "fp8") {
    return std::optional<Fp8BlockConfig>();
  }
  const std::string where = "config.json: quantization_config.";
  if (const auto fmt = q->find("fmt"); fmt != q->end() && *fmt != "e4m3") {
    return invalid_argument_error(where + "fmt " + fmt->dump() +
                                  " is not supported (FP8 checkpoints in e4m3 are)");
  }
  if (const auto act = q->find("activation_scheme"); act != q->end() && *act != "dynamic") {
    return invalid_argument_error(where + "activation_scheme " + act->dump() +
                                  " is not supported (\"dynamic\" is: Tandem keeps activations "
                                  "in float and takes no input scales)");
  }
  Fp8BlockConfig out;
  if (const auto size = q->find("weight_block_size"); size != q->end() && !size->is_null()) {
    auto positive = [](const nlohmann::json& v) {
      return v.is_number_integer() && v.get<int64_t>() > 0;
    };
    if (!size->is_array() || size->size() != 2 || !positive((*size)[0]) || !positive((*size)[1])) {
      return invalid_argument_error(where + "weight_block_size " + size->dump() +
                                    " is not two positive integers");
    }
    out.block_rows = (*size)[0].get<uint64_t>();
    out.block_cols = (*size)[1].get<uint64_t>();
  }
  if (out.block_cols != kBlock) {
    return invalid_argument_error(where + "weight_block_size [" + std::to_string(out.block_rows) +
                                  ", " + std::to_string(out.block_cols) +
                                  "]: blocks of 128 columns are supported");
  }
  return std::optional<Fp8BlockConfig>(out);
}

Result<ConvertedTensors> convert_fp8_block_weights(const Fp8BlockConfig& config,
                                                   std::span<const TensorInfo> tensors) {
  std::unordered_map<std::string_view, const TensorInfo*> by_name;
  for (const TensorInfo& t : tensors) by_name.emplace(t.name, &t);
  std::vector<std::string> problems;
  std::vector<Job> jobs;
  for (const TensorInfo& t : tensors) {
    if (t.type != TensorType::kF8_E4M3) continue;
    const std::string scale_name = fp8_scale_name(t.name);
    const auto it = by_name.find(scale_name);
    if (it == by_name.end()) {
      problems.push_back(t.name + ": F8_E4M3 weight without its " + scale_name);
      continue;
    }
    const TensorInfo& s = *it->second;
    if (t.shape.size() != 2) {
      problems.push_back(t.name + ": F8_E4M3 weight of shape " + shape_string(t.shape) +
                         " (a 2-D [rows, cols] matrix is supported)");
      continue;
    }
    const uint64_t rows = t.shape[0];
    const uint64_t cols = t.shape[1];
    if (cols % kBlock != 0) {
      problems.push_back(t.name + ": " + std::to_string(cols) +
                         " columns, not a multiple of 128 (the f8_e4m3_b128 block)");
      continue;
    }
    const std::vector<uint64_t> want = {(rows + config.block_rows - 1) / config.block_rows,
                                        (cols + config.block_cols - 1) / config.block_cols};
    if (s.type != TensorType::kF32 && s.type != TensorType::kBF16) {
      problems.push_back(scale_name + ": dtype " + std::string(tensor_type_name(s.type)) +
                         " (F32 or BF16 expected)");
      continue;
    }
    if (s.shape != want) {
      problems.push_back(scale_name + ": shape " + shape_string(s.shape) + ", expected " +
                         shape_string(want) + " for " + t.name + " " + shape_string(t.shape) +
                         " in blocks of [" + std::to_string(config.block_rows) + ", " +
                         std::to_string(config.block_cols) + "]");
      continue;
    }
    Job job{.weight = &t,
            .scale = &s,
            .scales = scale_values(s),
            .rows = rows,
            .cols = cols,
            .problem = {}};
    const auto bad = std::find_if(job.scales.begin(), job.scales.end(), [](float v) {
      return !std::isfinite(v) || std::fabs(v) >= kMaxScale;
    });
    if (bad != job.scales.end()) {
      problems.push_back(scale_name + ": block scale " + std::to_string(*bad) + " at index " +
                         std::to_string(bad - job.scales.begin()) +
                         " (finite scales below 2^7 = 128 in magnitude are supported)");
      continue;
    }
    jobs.push_back(std::move(job));
  }
  ConvertedTensors out;
  out.buffers.resize(jobs.size());
  if (problems.empty()) {
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        Job& job = jobs[i];
        // Allocated here, so that the pages are first touched by the thread that fills them.
        out.buffers[i] = OwnedCopy(job.rows * (job.cols / kBlock) * kBlockBytes);
        convert(config, job, out.buffers[i].data());
      }
    };
    const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                              std::max<size_t>(jobs.size(), 1));
    std::vector<std::thread> pool;
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
    work();
    for (std::thread& th : pool) th.join();
    for (const Job& job : jobs) {
      if (!job.problem.empty()) problems.push_back(job.problem);
    }
  }
  if (!problems.empty()) {
    std::string message = "FP8 weights: ";
    for (size_t i = 0; i < problems.size(); ++i) message += (i > 0 ? "; " : "") + problems[i];
    return invalid_argument_error(std::move(message));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    TensorInfo t;
    t.name = job.weight->name;
    t.type = TensorType::kF8_E4M3_B128;
    t.shape = job.weight->shape;
    t.n_elements = job.weight->n_elements;
    t.data = std::span<const uint8_t>(out.buffers[i].data(), out.buffers[i].size());
    t.file = job.weight->file;
    t.derived_from = job.weight->name + "," + job.scale->name;
    out.tensors.push_back(std::move(t));
    out.replaced.push_back(job.weight->name);
    out.replaced.push_back(job.scale->name);
  }
  return out;
}

}  // namespace tandem::model
