// GPT-OSS HF expert repack: MXFP4 block re-layout, float transposes, gate/up de-interleaving.
#include "engine/model/gpt_oss_hf_experts.h"

#include <cstring>
#include <string_view>
#include <unordered_map>

#include "engine/model/weight_names.h"

namespace tandem::model {

namespace {

constexpr uint64_t kBlock = 32;         // MXFP4 values per block
constexpr uint64_t kHfBlockBytes = 16;  // transformers: the nibbles only (scales apart)
constexpr uint64_t kGgmlBlockBytes = 17;

bool is_float_type(TensorType type) {
  return type == TensorType::kF32 || type == TensorType::kF16 || type == TensorType::kBF16;
}

uint64_t element_bytes(TensorType type) {
  return type == TensorType::kF32 ? 4 : 2;
}

// The 4-bit code of element k of a transformers MXFP4 block.
uint8_t hf_nibble(const uint8_t* block, unsigned k) {
  return static_cast<uint8_t>((block[k >> 1] >> ((k & 1u) * 4u)) & 0x0Fu);
}

class Repacker {
 public:
  Repacker(const ModelSpec& spec, std::span<const TensorInfo> tensors) : spec_(spec) {
    for (const TensorInfo& t : tensors) by_name_.emplace(t.name, &t);
  }

  Result<GptOssHfExperts> run() {
    const uint64_t e = spec_.n_experts;
    const uint64_t f = spec_.expert_ffn_size;
    const uint64_t h = spec_.hidden_size;
    for (uint64_t l = 0; l < spec_.n_layers; ++l) {
      const int64_t layer = static_cast<int64_t>(l);
      const std::string prefix = "model.layers." + std::to_string(l) + ".mlp.experts.";
      // gate_up: rows 2f (gate/up interleaved by row) x cols h; float form [E, h, 2f].
      matrix(prefix + "gate_up_proj", layer, {WeightRole::kExpertGate, WeightRole::kExpertUp},
             2 * f, h, "2 * intermediate_size", "hidden_size");
      matrix(prefix + "down_proj", layer, {WeightRole::kExpertDown}, h, f, "hidden_size",
             "intermediate_size");
      if (const TensorInfo* bias = find(prefix + "gate_up_proj_bias")) {
        if (check_float(*bias) &&
            check_shape(*bias, {e, 2 * f}, "(n_experts, 2 * intermediate_size)")) {
          // A bias [E, 2f] is a [E, 1, 2f] matrix: de-interleaving its columns gives [E, f, 1].
          for (unsigned t = 0; t < 2; ++t) {
            const WeightRole role =
                t == 0 ? WeightRole::kExpertGateBias : WeightRole::kExpertUpBias;
            add_float(*bias, role, layer, e, 1, 2 * f, 2, t, {e, f});
          }
          out_.replaced.push_back(bias->name);
        }
      }
    }
    if (!problems_.empty()) {
      std::string message = "gpt-oss expert tensors cannot be converted (" +
                            std::to_string(problems_.size()) + " problem" +
                            (problems_.size() == 1 ? "" : "s") + "):";
      for (const std::string& p : problems_) message += "\n  " + p;
      return invalid_argument_error(std::move(message));
    }
    return std::move(out_);
  }

 private:
  const TensorInfo* find(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }

  void problem(std::string text) { problems_.push_back(std::move(text)); }

  bool check_shape(const TensorInfo& t, std::vector<uint64_t> expected, std::string_view what) {
    if (t.shape == expected) return true;
    problem(t.name + ": shape " + shape_string(t.shape) + ", expected " + shape_string(expected) +
            " " + std::string(what));
    return false;
  }

  bool check_float(const TensorInfo& t) {
    if (is_float_type(t.type)) return true;
    problem(t.name + ": dtype " + std::string(tensor_type_name(t.type)) +
            " is not supported (F32, F16, BF16; MXFP4 matrices come as _blocks + _scales)");
    return false;
  }

  bool check_u8(const TensorInfo& t) {
    if (t.type == TensorType::kU8) return true;
    problem(t.name + ": dtype " + std::string(tensor_type_name(t.type)) +
            ", expected U8 (MXFP4 blocks and E8M0 scales)");
    return false;
  }

  // One projection's matrix `base` (rows x cols as the kernels take it), in either layout, into
  // one derived tensor per role: roles.size() == 2 de-interleaves rows (gate even, up odd).
  void matrix(const std::string& base, int64_t layer, std::vector<WeightRole> roles, uint64_t rows,
              uint64_t cols, std::string_view rows_name, std::string_view cols_name) {
    const std::string r_name(rows_name), c_name(cols_name);
    const uint64_t e = spec_.n_experts;
    const TensorInfo* blocks = find(base + "_blocks");
    const TensorInfo* scales = find(base + "_scales");
    const TensorInfo* dense = find(base);
    const uint64_t step = roles.size();
    if ((blocks != nullptr || scales != nullptr) && dense != nullptr) {
      problem(dense->name + ": the checkpoint also holds " +
              (blocks != nullptr ? blocks->name : scales->name) +
              "; one projection must come in one layout");
      return;
    }
    if (dense != nullptr) {
      // Float [E, cols, rows] (x @ W): transpose, taking every step-th output column.
      if (!check_float(*dense) ||
          !check_shape(*dense, {e, cols, rows}, "(n_experts, " + c_name + ", " + r_name + ")")) {
        return;
      }
      for (unsigned t = 0; t < step; ++t) {
        add_float(*dense, roles[t], layer, e, cols, rows, step, t, {e, rows / step, cols});
      }
      out_.replaced.push_back(dense->name);
      return;
    }
    if (blocks == nullptr && scales == nullptr) return;  // missing: the binder says so
    if (blocks == nullptr || scales == nullptr) {
      const TensorInfo* present = blocks != nullptr ? blocks : scales;
      problem(present->name + ": found without " + base +
              (blocks != nullptr ? "_scales" : "_blocks"));
      return;
    }
    if (cols % kBlock != 0) {
      problem(blocks->name + ": " + c_name + " " + std::to_string(cols) +
              " is not a multiple of the MXFP4 block size 32");
      return;
    }
    const uint64_t g = cols / kBlock;
    const std::string dims = "(n_experts, " + r_name + ", " + c_name + " / 32";
    const bool ok_blocks =
        check_u8(*blocks) && check_shape(*blocks, {e, rows, g, kHfBlockBytes}, dims + ", 16)");
    const bool ok_scales = check_u8(*scales) && check_shape(*scales, {e, rows, g}, dims + ")");
    if (!ok_blocks || !ok_scales) return;
    for (unsigned t = 0; t < step; ++t) {
      const uint64_t out_rows = rows / step;
      OwnedCopy& buf = out_.buffers.emplace_back(e * out_rows * g * kGgmlBlockBytes);
      for (uint64_t x = 0; x < e; ++x) {
        for (uint64_t r = 0; r < out_rows; ++r) {
          const uint64_t src_row = x * rows + r * step + t;
          const uint8_t* src = blocks->data.data() + src_row * g * kHfBlockBytes;
          const uint8_t* sc = scales->data.data() + src_row * g;
          uint8_t* dst = buf.data() + (x * out_rows + r) * g * kGgmlBlockBytes;
          for (uint64_t b = 0; b < g; ++b) {
            mxfp4_block_hf_to_ggml(src + b * kHfBlockBytes, sc[b], dst + b * kGgmlBlockBytes);
          }
        }
      }
      add_tensor(roles[t], layer, TensorType::kMXFP4, {e, out_rows, cols}, buf, *blocks,
                 blocks->name + ", " + scales->name);
    }
    out_.replaced.push_back(blocks->name);
    out_.replaced.push_back(scales->name);
  }

  // src viewed as [e, a, b] (elements of its float type) -> [e, b / step, a] with
  // dst(x, r, i) = src(x, i, r * step + t); `shape` is the derived tensor's shape.
  void add_float(const TensorInfo& src, WeightRole role, int64_t layer, uint64_t e, uint64_t a,
                 uint64_t b, uint64_t step, unsigned t, std::vector<uint64_t> shape) {
    const uint64_t es = element_bytes(src.type);
    const uint64_t out_b = b / step;
    OwnedCopy& buf = out_.buffers.emplace_back(e * out_b * a * es);
    const uint8_t* s = src.data.data();
    for (uint64_t x = 0; x < e; ++x) {
      for (uint64_t r = 0; r < out_b; ++r) {
        uint8_t* dst = buf.data() + (x * out_b + r) * a * es;
        const uint64_t col = r * step + t;
        for (uint64_t i = 0; i < a; ++i) {
          std::memcpy(dst + i * es, s + ((x * a + i) * b + col) * es, es);
        }
      }
    }
    add_tensor(role, layer, src.type, std::move(shape), buf, src, src.name);
  }

  void add_tensor(WeightRole role, int64_t layer, TensorType type, std::vector<uint64_t> shape,
                  const OwnedCopy& buf, const TensorInfo& source, std::string from) {
    TensorInfo t;
    t.name = gpt_oss_hf_derived_name(role, layer);
    t.type = type;
    t.n_elements = 1;
    for (uint64_t d : shape) t.n_elements *= d;
    t.shape = std::move(shape);
    t.data = std::span<const uint8_t>(buf.data(), buf.size());
    t.file = source.file;
    t.file_offset = 0;
    t.derived_from = std::move(from);
    out_.tensors.push_back(std::move(t));
  }

  const ModelSpec& spec_;
  std::unordered_map<std::string_view, const TensorInfo*> by_name_;
  GptOssHfExperts out_;
  std::vector<std::string> problems_;
};

}  // namespace

void mxfp4_block_hf_to_ggml(const uint8_t* hf_block, uint8_t scale, uint8_t* ggml_block) {
  ggml_block[0] = scale;
  for (unsigned j = 0; j < 16; ++j) {
    ggml_block[1 + j] =
        static_cast<uint8_t>(hf_nibble(hf_block, j) | (hf_nibble(hf_block, j + 16) << 4));
  }
}

Result<GptOssHfExperts> repack_gpt_oss_hf_experts(const ModelSpec& spec,
                                                  std::span<const TensorInfo> tensors) {
  return Repacker(spec, tensors).run();
}

}  // namespace tandem::model
