// GPT-OSS HF expert tensors converted at open into the [rows = out, cols = in] matrices and
// per-projection biases the kernels take (one copy, owned by the result).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model/converted_tensors.h"
#include "engine/model/model_spec.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

// What a transformers GptOssForCausalLM checkpoint holds per layer L, under
// model.layers.L.mlp.experts. (E = n_experts, f = intermediate_size, h = hidden_size; facts from
// transformers' modeling_gpt_oss.py GptOssExperts and integrations/mxfp4.py
// _convert_moe_packed_tensors):
//   gate_up_proj       [E, h, 2f] float, applied as x @ W (transposed relative to nn.Linear);
//                      output column 2j is gate j, column 2j + 1 is up j (interleaved);
//   gate_up_proj_bias  [E, 2f] float, interleaved likewise;
//   down_proj          [E, f, h] float, applied as x @ W;
//   down_proj_bias     [E, h] -- already what the kernels take; not converted here;
// or, in the MXFP4 layout every published checkpoint uses, instead of the float matrices:
//   gate_up_proj_blocks [E, 2f, h/32, 16] U8 and gate_up_proj_scales [E, 2f, h/32] U8,
//   down_proj_blocks    [E, h, f/32, 16] U8 and down_proj_scales    [E, h, f/32] U8:
//   rows are output features (gate/up interleaved by row), each run of 32 input features is one
//   block: element 2k of a block is the low nibble of its byte k, element 2k + 1 the high nibble,
//   an FP4 E2M1 code with the values {0, .5, 1, 1.5, 2, 3, 4, 6, -0, -.5, ..., -6}, times
//   2^(scale - 127).
// Derived tensors (names: gpt_oss_hf_derived_name; bound like GGUF's fused experts):
//   gate_proj.weight, up_proj.weight [E, f, h], down_proj.weight [E, h, f]: the float type of the
//     source, transposed and de-interleaved; or MXFP4 (ggml type 39, 17 bytes per 32 values: the
//     E8M0 scale byte unchanged, then 16 bytes whose byte 1 + j holds element j in its low nibble
//     and element j + 16 in its high nibble -- the same values: ggml's {0, 1, 2, 3, 4, 6, 8, 12,
//     ...} x 2^(e - 128) equals HF's table x 2^(e - 127));
//   gate_proj.bias, up_proj.bias [E, f]: the source bias de-interleaved.
using GptOssHfExperts = ConvertedTensors;

// Converts every layer's gate_up / down expert tensors (either layout) and gate_up_proj_bias of
// `tensors` (a GptOssForCausalLM checkpoint's file tensors) for `spec` (validated: the shapes
// are checked against its n_experts, intermediate and hidden sizes). A layer without these
// tensors yields nothing (the binder then reports them missing). INVALID_ARGUMENT listing every
// problem, each naming its tensor: a shape or dtype that does not match, a _blocks without its
// _scales (or the reverse), both layouts for one projection, a hidden or intermediate size that
// is not a multiple of 32 for MXFP4. Pure (allocates the copies); any thread.
Result<GptOssHfExperts> repack_gpt_oss_hf_experts(const ModelSpec& spec,
                                                  std::span<const TensorInfo> tensors);

// One MXFP4 block from transformers' layout (16 bytes, element 2k low / 2k + 1 high nibble of
// byte k, plus its scale byte) to ggml's 17-byte block (scale, then element j low / j + 16 high
// nibble of byte 1 + j).
void mxfp4_block_hf_to_ggml(const uint8_t* hf_block, uint8_t scale, uint8_t* ggml_block);

}  // namespace tandem::model
