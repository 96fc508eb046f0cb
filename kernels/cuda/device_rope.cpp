// device_rope: a CPU RopeConfig as the CUDA RoPE kernel takes it (plain host code).
#include <cmath>

#include "kernels/cpu/rope.h"
#include "kernels/cuda/dense_ops.h"

namespace tandem::kernels::cuda {

DeviceRope device_rope(const RopeConfig& config) {
  DeviceRope r;
  r.neox = config.layout == RopeLayout::kNeox;
  r.head_dim = config.head_dim;
  r.rot_dims = config.rot_dims;
  r.freq_base = config.freq_base;
  r.freq_scale = config.freq_scale;
  r.ext_factor = config.ext_factor;
  r.mscale = static_cast<double>(config.attn_factor);
  if (config.ext_factor != 0.0f) {
    // kernels::rope's per-call tables, computed once here: the same calls in the same precision.
    const RopeYarnCorrDims dims =
        rope_yarn_corr_dims(config.rot_dims, config.n_ctx_orig, config.freq_base, config.beta_fast,
                            config.beta_slow, config.yarn_round_corr_dims);
    r.corr_low = dims.low;
    r.corr_high = dims.high;
    r.mscale *= 1.0 + 0.1 * std::log(1.0 / static_cast<double>(config.freq_scale));
  }
  return r;
}

}  // namespace tandem::kernels::cuda
