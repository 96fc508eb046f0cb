// Grouped expert FFN kernels: fused gate/up + activation stage, down stage, slot-order combine.
//
// Layout of a launch: grid.x walks blocks of kTileN output features, grid.y the (expert, row
// tile) work items of the whole group, so one launch serves every expert of a layer. A block
// keeps a kTileM x kTileK slice of its rows' activations and a kTileN x kTileK slice of the
// weights (dequantized to float on load) in shared memory and steps over K.
//
// Not yet optimized (correct first): no tensor cores (plain FMA in float), no vectorized or
// asynchronous (cp.async / TMA) weight loads (Q4_0, MXFP4 and the K-quants read byte by byte, and
// a K-quant's scales are unpacked again for every group of 8 weights), no double buffering, no
// split-K for decode (one token per expert fills only hidden/64 or ffn/64 blocks per expert), rows
// of a tile are a fixed 8 (prefill with many tokens per expert would want larger M tiles), and the
// gate/up result makes a round trip through global memory between the two stages.
#include "kernels/cuda/expert_ffn.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cpu/vector_ops.h"
#include "kernels/cuda/cuda_weight_types.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/weight_load.cuh"

namespace tandem::kernels::cuda {
namespace {

using weight_load::load_weight_tile;

constexpr int kTileM = static_cast<int>(kExpertFfnRowTile);  // rows (tokens) per block
constexpr int kTileN = weight_load::kTileN;                  // output features per block
constexpr int kTileK = weight_load::kTileK;                  // K per step
constexpr int kThreads = weight_load::kTileThreads;
constexpr unsigned kMaxGridY = 65535;

static_assert(kTileM * kTileK == kThreads, "one activation element per thread per K step");
static_assert(kTileN * kTileK == kThreads * 8, "eight weight elements per thread per K step");
static_assert(kTileM * kTileN == kThreads * 2, "two outputs per thread");

struct StageParams {
  const DeviceExpert* experts;
  const uint32_t* tiles;
  int n_tiles;
  const uint32_t* row_input;       // stage 1: x row per row; stage 2: null (row r reads x row r)
  const float* row_scale;          // stage 2 only; may be null
  ExpertFfnActivation activation;  // stage 1 only
  float oai_alpha;                 // kSwiGluOai's constants (kernels::swiglu_oai_mul's)
  float oai_limit;
  const float* x;
  float* y;
  int k;  // columns of W = row length of x
  int n;  // rows of W = row length of y
  size_t row_bytes;
};

// Loads the kTileM x kTileK activation slice at k0 of the tile's rows (zero past the rows / K).
__device__ __forceinline__ void load_x_tile(const StageParams& p, uint32_t r0, uint32_t count,
                                            int k0, float (*xs)[kTileK]) {
  const int m = threadIdx.x / kTileK;
  const int c = threadIdx.x % kTileK;
  float v = 0.0f;
  if (static_cast<uint32_t>(m) < count && k0 + c < p.k) {
    const uint32_t row = r0 + static_cast<uint32_t>(m);
    const size_t src = p.row_input != nullptr ? p.row_input[row] : row;
    v = p.x[src * static_cast<size_t>(p.k) + static_cast<size_t>(k0 + c)];
  }
  xs[m][c] = v;
}

// v + bias[n], or v without a bias: the order of CpuExpertWorker's add_bias.
__device__ __forceinline__ float plus_bias(float v, const float* bias, int n) {
  return bias != nullptr ? v + bias[n] : v;
}

// The activation of gate result g and up result u (biases included), each step as the CPU's
// silu_mul / swiglu_oai_mul take it: min and clamp written as std::min / std::clamp compare.
__device__ __forceinline__ float activate(const StageParams& p, float g, float u) {
  if (p.activation == ExpertFfnActivation::kSwiGluOai) {
    const float limit = p.oai_limit;
    g = limit < g ? limit : g;
    u = u < -limit ? -limit : (limit < u ? limit : u);
    return g / (1.0f + expf(p.oai_alpha * -g)) * (u + 1.0f);
  }
  return g / (1.0f + expf(-g)) * u;
}

// Stage 1: y[r] = act(gate x[r] + gate_bias, up x[r] + up_bias) over ffn outputs (gate and up
// share one type).
template <TensorType T>
__global__ void __launch_bounds__(kThreads) gate_up_kernel(StageParams p) {
  __shared__ float xs[kTileM][kTileK];
  __shared__ float wg[kTileN][kTileK + 1];
  __shared__ float wu[kTileN][kTileK + 1];
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const int local_n = threadIdx.x % kTileN;
  const int m_a = threadIdx.x / kTileN;  // 0..3
  const int m_b = m_a + kTileM / 2;      // 4..7
  for (int t = static_cast<int>(blockIdx.y); t < p.n_tiles; t += static_cast<int>(gridDim.y)) {
    const uint32_t slot = p.tiles[3 * t];
    const uint32_t r0 = p.tiles[3 * t + 1];
    const uint32_t count = p.tiles[3 * t + 2];
    const auto* gate = static_cast<const uint8_t*>(p.experts[slot].gate);
    const auto* up = static_cast<const uint8_t*>(p.experts[slot].up);
    float g_a = 0.0f, g_b = 0.0f, u_a = 0.0f, u_b = 0.0f;
    for (int k0 = 0; k0 < p.k; k0 += kTileK) {
      load_x_tile(p, r0, count, k0, xs);
      load_weight_tile<T>(gate, p.row_bytes, p.n, p.k, n0, k0, wg);
      load_weight_tile<T>(up, p.row_bytes, p.n, p.k, n0, k0, wu);
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kTileK; ++kk) {
        const float wgv = wg[local_n][kk];
        const float wuv = wu[local_n][kk];
        const float xa = xs[m_a][kk];
        const float xb = xs[m_b][kk];
        g_a = fmaf(xa, wgv, g_a);
        u_a = fmaf(xa, wuv, u_a);
        g_b = fmaf(xb, wgv, g_b);
        u_b = fmaf(xb, wuv, u_b);
      }
      __syncthreads();
    }
    const int n = n0 + local_n;
    if (n < p.n) {
      const float* gate_bias = p.experts[slot].gate_bias;
      const float* up_bias = p.experts[slot].up_bias;
      if (static_cast<uint32_t>(m_a) < count) {
        p.y[static_cast<size_t>(r0 + m_a) * p.n + n] =
            activate(p, plus_bias(g_a, gate_bias, n), plus_bias(u_a, up_bias, n));
      }
      if (static_cast<uint32_t>(m_b) < count) {
        p.y[static_cast<size_t>(r0 + m_b) * p.n + n] =
            activate(p, plus_bias(g_b, gate_bias, n), plus_bias(u_b, up_bias, n));
      }
    }
  }
}

// Stage 2: y[r] = scale[r] * (down x[r] + down_bias).
template <TensorType T>
__global__ void __launch_bounds__(kThreads) down_kernel(StageParams p) {
  __shared__ float xs[kTileM][kTileK];
  __shared__ float wd[kTileN][kTileK + 1];
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const int local_n = threadIdx.x % kTileN;
  const int m_a = threadIdx.x / kTileN;
  const int m_b = m_a + kTileM / 2;
  for (int t = static_cast<int>(blockIdx.y); t < p.n_tiles; t += static_cast<int>(gridDim.y)) {
    const uint32_t slot = p.tiles[3 * t];
    const uint32_t r0 = p.tiles[3 * t + 1];
    const uint32_t count = p.tiles[3 * t + 2];
    const auto* down = static_cast<const uint8_t*>(p.experts[slot].down);
    float a = 0.0f, b = 0.0f;
    for (int k0 = 0; k0 < p.k; k0 += kTileK) {
      load_x_tile(p, r0, count, k0, xs);
      load_weight_tile<T>(down, p.row_bytes, p.n, p.k, n0, k0, wd);
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kTileK; ++kk) {
        const float w = wd[local_n][kk];
        a = fmaf(xs[m_a][kk], w, a);
        b = fmaf(xs[m_b][kk], w, b);
      }
      __syncthreads();
    }
    const int n = n0 + local_n;
    if (n < p.n) {
      const float* down_bias = p.experts[slot].down_bias;
      a = plus_bias(a, down_bias, n);
      b = plus_bias(b, down_bias, n);
      if (static_cast<uint32_t>(m_a) < count) {
        const uint32_t r = r0 + m_a;
        p.y[static_cast<size_t>(r) * p.n + n] = p.row_scale != nullptr ? p.row_scale[r] * a : a;
      }
      if (static_cast<uint32_t>(m_b) < count) {
        const uint32_t r = r0 + m_b;
        p.y[static_cast<size_t>(r) * p.n + n] = p.row_scale != nullptr ? p.row_scale[r] * b : b;
      }
    }
  }
}

__global__ void combine_kernel(const uint32_t* pair_row, const float* out, int k, int hidden,
                               float* token_out) {
  const size_t t = blockIdx.x;
  for (int c = static_cast<int>(threadIdx.x); c < hidden; c += static_cast<int>(blockDim.x)) {
    float acc = 0.0f;
    for (int s = 0; s < k; ++s) {
      const uint32_t r = pair_row[t * k + s];
      if (r != UINT32_MAX) acc += out[static_cast<size_t>(r) * hidden + c];
    }
    token_out[t * hidden + c] = acc;
  }
}

// Runs Launch<T>::run(p, grid, stream) for the listed type T == type, then reports a refused
// launch as INTERNAL.
template <template <TensorType> class Launch>
Status dispatch(TensorType type, const StageParams& p, dim3 grid, cudaStream_t stream) {
  const bool listed = dispatch_cuda_weight_type(
      type, [&](auto t) { Launch<decltype(t)::value>::run(p, grid, stream); });
  if (!listed) {  // expert_ffn_enqueue checks the types first
    return invalid_argument_error(std::string("CUDA expert FFN: unsupported weight type ") +
                                  std::string(tensor_type_name(type)));
  }
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return internal_error(std::string("CUDA expert FFN launch failed: ") + cudaGetErrorString(err));
  }
  return Status();
}

template <TensorType T>
struct GateUpLaunch {
  static void run(const StageParams& p, dim3 grid, cudaStream_t stream) {
    TANDEM_CUDA_LAUNCH(grid, kThreads, stream, gate_up_kernel<T>)(p);
  }
};

template <TensorType T>
struct DownLaunch {
  static void run(const StageParams& p, dim3 grid, cudaStream_t stream) {
    TANDEM_CUDA_LAUNCH(grid, kThreads, stream, down_kernel<T>)(p);
  }
};

Status check_dimension(TensorType type, size_t cols, const char* what) {
  if (cols == 0 || cols > static_cast<size_t>(INT32_MAX / 2)) {
    return invalid_argument_error(std::string("CUDA expert FFN: ") + what + " " +
                                  std::to_string(cols) + " out of range");
  }
  return check_cuda_weight_cols(type, cols, "CUDA expert FFN", what);
}

}  // namespace

bool expert_ffn_supports(TensorType type) {
  return find_cuda_weight_type(type) != nullptr;
}

size_t make_expert_ffn_tiles(const size_t* row_offsets, size_t n_experts, uint32_t* tiles) {
  size_t n = 0;
  for (size_t i = 0; i < n_experts; ++i) {
    for (size_t r = row_offsets[i]; r < row_offsets[i + 1]; r += kExpertFfnRowTile) {
      tiles[3 * n] = static_cast<uint32_t>(i);
      tiles[3 * n + 1] = static_cast<uint32_t>(r);
      tiles[3 * n + 2] = static_cast<uint32_t>(std::min(kExpertFfnRowTile, row_offsets[i + 1] - r));
      ++n;
    }
  }
  return n;
}

Status expert_ffn_enqueue(const ExpertFfnGroup& g, void* stream_ptr) {
  if (g.gate_type != g.up_type) {
    return invalid_argument_error("CUDA expert FFN: gate and up must have one type");
  }
  if (g.activation != ExpertFfnActivation::kSwiGlu &&
      g.activation != ExpertFfnActivation::kSwiGluOai) {
    return invalid_argument_error("CUDA expert FFN: unsupported activation " +
                                  std::to_string(static_cast<int>(g.activation)));
  }
  // Also refuses unlisted types, naming the supported ones.
  TANDEM_RETURN_IF_ERROR(check_dimension(g.gate_type, g.hidden, "hidden"));
  TANDEM_RETURN_IF_ERROR(check_dimension(g.down_type, g.ffn, "ffn"));
  if (g.n_tiles == 0 || g.n_rows == 0) return Status();
  if (g.n_tiles > static_cast<size_t>(INT32_MAX) || g.n_rows > UINT32_MAX) {
    return invalid_argument_error("CUDA expert FFN: too many rows in one group");
  }
  auto* stream = static_cast<cudaStream_t>(stream_ptr);
  const unsigned grid_y = static_cast<unsigned>(std::min<size_t>(g.n_tiles, kMaxGridY));

  StageParams p{};
  p.experts = g.experts;
  p.tiles = g.tiles;
  p.n_tiles = static_cast<int>(g.n_tiles);
  p.row_input = g.row_input;
  p.row_scale = nullptr;
  p.activation = g.activation;
  p.oai_alpha = kSwiGluOaiAlpha;
  p.oai_limit = kSwiGluOaiLimit;
  p.x = g.x;
  p.y = g.h;
  p.k = static_cast<int>(g.hidden);
  p.n = static_cast<int>(g.ffn);
  TANDEM_ASSIGN_OR_RETURN(p.row_bytes, tensor_type_bytes(g.gate_type, g.hidden));
  const dim3 grid1(static_cast<unsigned>((g.ffn + kTileN - 1) / kTileN), grid_y);
  TANDEM_RETURN_IF_ERROR(dispatch<GateUpLaunch>(g.gate_type, p, grid1, stream));

  p.row_input = nullptr;
  p.row_scale = g.row_scale;
  p.x = g.h;
  p.y = g.out;
  p.k = static_cast<int>(g.ffn);
  p.n = static_cast<int>(g.hidden);
  TANDEM_ASSIGN_OR_RETURN(p.row_bytes, tensor_type_bytes(g.down_type, g.ffn));
  const dim3 grid2(static_cast<unsigned>((g.hidden + kTileN - 1) / kTileN), grid_y);
  return dispatch<DownLaunch>(g.down_type, p, grid2, stream);
}

Status expert_ffn_combine_enqueue(const uint32_t* pair_row, const float* out, size_t n_tokens,
                                  size_t k, size_t hidden, float* token_out, void* stream_ptr) {
  if (n_tokens == 0) return Status();
  if (n_tokens > INT32_MAX || k == 0 || k > 1024 || hidden == 0 || hidden > INT32_MAX) {
    return invalid_argument_error("CUDA expert FFN combine: sizes out of range");
  }
  TANDEM_CUDA_LAUNCH(static_cast<unsigned>(n_tokens), kThreads,
                     static_cast<cudaStream_t>(stream_ptr), combine_kernel)
  (pair_row, out, static_cast<int>(k), static_cast<int>(hidden), token_out);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return internal_error(std::string("CUDA expert FFN combine launch failed: ") +
                          cudaGetErrorString(err));
  }
  return Status();
}

}  // namespace tandem::kernels::cuda
