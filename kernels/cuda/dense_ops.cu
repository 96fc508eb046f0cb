// Dense forward-pass kernels (matmul, RMSNorm, RoPE, element-wise ops) of dense_ops.h; the paged
// KV write and attention are in dense_attention.cu.
//
// Not yet optimized (correct first):
// - matmul: no tensor cores (plain float FMA); only the decode kernel's F32/F16/BF16 rows with
//   cols % 8 == 0 take 16-byte loads (the block types and the tiled kernel load element by element,
//   Q4_0/MXFP4/K-quants byte by byte; no cp.async/TMA, no double buffering; a K-quant's scales
//   are unpacked again for every group of 8); the decode kernel (n_tokens <= 8) gives one warp per
//   output row with no split-K, so a matrix with few rows leaves SMs idle; the tiled kernel
//   (n_tokens > 8) keeps 32 tokens x 64 outputs per block and stages x through shared memory
//   with no register blocking beyond 8 outputs per thread.
// - attention: one block per (token, query head), positions in chunks of 64 in order, so a long
//   context on few heads (decode) runs on few SMs (no split over positions / flash-decoding);
//   GQA groups read their shared K/V rows once per query head instead of once per group (MLA:
//   every one of DeepSeek-V3's 128 heads reads the one latent row again); no tensor cores.
// - batched matmul (MLA's per-head k_b / v_b): the plain kernels with a batch grid dimension.
// - RoPE recomputes inv_freq with a double pow per (token, pair) instead of a cached table.
// - element-wise ops are separate launches (no fusion with the matmuls or norms).
#include "kernels/cuda/dense_ops.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_weight_types.h"
#include "kernels/cuda/dense_ops_internal.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/weight_load.cuh"

namespace tandem::kernels::cuda {
namespace {

using weight_load::kTileK;
using weight_load::kTileN;
using weight_load::kTileThreads;
using weight_load::load8;
using weight_load::load8_vec;
using weight_load::load_weight_tile;

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Matmul decode kernel: one warp per output row, all (<= kDecodeMaxTokens) tokens at once.
constexpr int kDecodeMaxTokens = 8;
constexpr int kDecodeThreads = 256;
constexpr int kDecodeRowsPerBlock = kDecodeThreads / kWarp;
constexpr int kDecodeColsPerStep = kWarp * 8;  // each lane converts 8 weights per step

// Matmul tiled kernel: kTiledM tokens x kTileN outputs per block, K in steps of kTileK.
constexpr int kTiledM = 32;
constexpr int kTiledThreads = kTileThreads;                           // 256
constexpr int kTiledOutPerThread = kTiledM * kTileN / kTiledThreads;  // 8
constexpr int kTiledMStride = kTiledThreads / kTileN;                 // 4
static_assert(kTiledM * kTileN == kTiledThreads * kTiledOutPerThread, "8 outputs per thread");
static_assert(kTiledM * kTileK == kTiledThreads * 4, "four activations per thread per K step");

constexpr int kNormThreads = 256;
constexpr int kRopeThreads = 128;
constexpr int kElemThreads = 256;
constexpr size_t kMaxElemBlocks = 8192;  // grid-stride beyond this
constexpr size_t kMaxDim = size_t{1} << 30;
constexpr unsigned kMaxGridY = 65535;

// ---- matmul -------------------------------------------------------------------------------

// Where token t's input and output rows of batch blockIdx.z lie (MatmulBatch in floats, the
// weights' batch step in bytes); a plain matmul is one batch with x_ld = cols, y_ld = rows.
struct MatmulStrides {
  size_t x_ld;
  size_t y_ld;
  size_t x_batch;
  size_t y_batch;
  size_t w_batch;  // bytes
};

// kVec (F32/F16/BF16 only): cols % 8 == 0 and w, x 16-byte aligned, so every group of 8 is
// whole and both the weights (load8_vec) and x (two float4) take wide loads.
template <TensorType T, bool kVec>
__global__ void __launch_bounds__(kDecodeThreads)
    matmul_decode_kernel(const uint8_t* w, size_t row_bytes, int rows, int cols, const float* x,
                         int n_tokens, float* y, MatmulStrides st) {
  w += static_cast<size_t>(blockIdx.z) * st.w_batch;
  x += static_cast<size_t>(blockIdx.z) * st.x_batch;
  y += static_cast<size_t>(blockIdx.z) * st.y_batch;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int r = static_cast<int>(blockIdx.x) * kDecodeRowsPerBlock + warp;
  if (r >= rows) return;  // warp-uniform: the whole warp leaves, so the shuffles below stay full
  const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
  float acc[kDecodeMaxTokens];
#pragma unroll
  for (int t = 0; t < kDecodeMaxTokens; ++t) acc[t] = 0.0f;
  for (int c0 = lane * 8; c0 < cols; c0 += kDecodeColsPerStep) {
    float wv[8];
    if constexpr (kVec) {
      load8_vec<T>(row, c0, wv);
    } else {
      load8<T>(row, c0, cols, wv);
    }
    const bool whole = kVec || c0 + 8 <= cols;
#pragma unroll
    for (int t = 0; t < kDecodeMaxTokens; ++t) {
      if (t < n_tokens) {
        const float* xt = x + static_cast<size_t>(t) * st.x_ld + c0;
        if constexpr (kVec) {
          const float4 xa = reinterpret_cast<const float4*>(xt)[0];
          const float4 xb = reinterpret_cast<const float4*>(xt)[1];
          acc[t] = fmaf(wv[0], xa.x, acc[t]);
          acc[t] = fmaf(wv[1], xa.y, acc[t]);
          acc[t] = fmaf(wv[2], xa.z, acc[t]);
          acc[t] = fmaf(wv[3], xa.w, acc[t]);
          acc[t] = fmaf(wv[4], xb.x, acc[t]);
          acc[t] = fmaf(wv[5], xb.y, acc[t]);
          acc[t] = fmaf(wv[6], xb.z, acc[t]);
          acc[t] = fmaf(wv[7], xb.w, acc[t]);
        } else if (whole) {
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[t] = fmaf(wv[j], xt[j], acc[t]);
        } else {  // the row's last partial group (F32/F16/BF16 only): wv is zero past cols
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const float xv = c0 + j < cols ? xt[j] : 0.0f;
            acc[t] = fmaf(wv[j], xv, acc[t]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kDecodeMaxTokens; ++t) {
#pragma unroll
    for (int off = kWarp / 2; off > 0; off /= 2) {
      acc[t] += __shfl_xor_sync(kFullMask, acc[t], off);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int t = 0; t < kDecodeMaxTokens; ++t) {
      if (t < n_tokens) y[static_cast<size_t>(t) * st.y_ld + r] = acc[t];
    }
  }
}

template <TensorType T>
__global__ void __launch_bounds__(kTiledThreads)
    matmul_tiled_kernel(const uint8_t* w, size_t row_bytes, int rows, int cols, const float* x,
                        int n_tokens, float* y, MatmulStrides st) {
  w += static_cast<size_t>(blockIdx.z) * st.w_batch;
  x += static_cast<size_t>(blockIdx.z) * st.x_batch;
  y += static_cast<size_t>(blockIdx.z) * st.y_batch;
  __shared__ float xs[kTiledM][kTileK + 1];
  __shared__ float ws[kTileN][kTileK + 1];
  const int tid = static_cast<int>(threadIdx.x);
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const int local_n = tid % kTileN;
  const int m0 = tid / kTileN;  // 0..3; a warp shares m0, so xs reads are broadcasts
  for (int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTiledM; t0 < n_tokens;
       t0 += static_cast<int64_t>(gridDim.y) * kTiledM) {
    float acc[kTiledOutPerThread];
#pragma unroll
    for (int i = 0; i < kTiledOutPerThread; ++i) acc[i] = 0.0f;
    for (int k0 = 0; k0 < cols; k0 += kTileK) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = tid / kTileK + (kTiledThreads / kTileK) * i;  // 0..31
        const int c = tid % kTileK;
        const int64_t t = t0 + m;
        xs[m][c] = (t < n_tokens && k0 + c < cols)
                       ? x[static_cast<size_t>(t) * st.x_ld + static_cast<size_t>(k0 + c)]
                       : 0.0f;
      }
      load_weight_tile<T>(w, row_bytes, rows, cols, n0, k0, ws);
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kTileK; ++kk) {
        const float wv = ws[local_n][kk];
#pragma unroll
        for (int i = 0; i < kTiledOutPerThread; ++i) {
          acc[i] = fmaf(xs[m0 + kTiledMStride * i][kk], wv, acc[i]);
        }
      }
      __syncthreads();  // before the next step overwrites xs and ws
    }
    const int n = n0 + local_n;
    if (n < rows) {
#pragma unroll
      for (int i = 0; i < kTiledOutPerThread; ++i) {
        const int64_t t = t0 + m0 + kTiledMStride * i;
        if (t < n_tokens) y[static_cast<size_t>(t) * st.y_ld + n] = acc[i];
      }
    }
  }
}

template <TensorType T>
void launch_matmul(const DeviceMatrix& w, size_t row_bytes, const float* x, size_t n_tokens,
                   float* y, const MatmulStrides& st, unsigned n_batches, cudaStream_t stream) {
  const auto* data = static_cast<const uint8_t*>(w.data);
  const int rows = static_cast<int>(w.rows);
  const int cols = static_cast<int>(w.cols);
  const int n = static_cast<int>(n_tokens);
  if (n_tokens <= kDecodeMaxTokens) {
    const dim3 grid(static_cast<unsigned>((w.rows + kDecodeRowsPerBlock - 1) / kDecodeRowsPerBlock),
                    1, n_batches);
    bool vec = false;
    if constexpr (weight_load::kIsFloatType<T>) {
      // Every batch's weights and every token's inputs 16-byte aligned.
      vec = w.cols % 8 == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0 &&
            st.w_batch % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && st.x_ld % 4 == 0 &&
            st.x_batch % 4 == 0;
      if (vec) {
        TANDEM_CUDA_LAUNCH(grid, kDecodeThreads, stream, matmul_decode_kernel<T, true>)
        (data, row_bytes, rows, cols, x, n, y, st);
      }
    }
    if (!vec) {
      TANDEM_CUDA_LAUNCH(grid, kDecodeThreads, stream, matmul_decode_kernel<T, false>)
      (data, row_bytes, rows, cols, x, n, y, st);
    }
  } else {
    const dim3 grid(
        static_cast<unsigned>((w.rows + kTileN - 1) / kTileN),
        static_cast<unsigned>(std::min<size_t>((n_tokens + kTiledM - 1) / kTiledM, kMaxGridY)),
        n_batches);
    TANDEM_CUDA_LAUNCH(grid, kTiledThreads, stream, matmul_tiled_kernel<T>)
    (data, row_bytes, rows, cols, x, n, y, st);
  }
}

// ---- RMSNorm ------------------------------------------------------------------------------

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(kFullMask, v, off);
  return v;
}

// One block per row. The sum of squares accumulates in double (as kernels::rms_norm), the scale
// is computed and applied in float. Each thread reads and writes only its own elements, so
// x == out is safe.
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const float* x, const float* weight, float eps, int dim, size_t stride,
                    float* out) {
  __shared__ double partial[kNormThreads / kWarp];
  const int tid = static_cast<int>(threadIdx.x);
  const size_t base = static_cast<size_t>(blockIdx.x) * stride;
  double sum = 0.0;
  for (int i = tid; i < dim; i += kNormThreads) {
    const float v = x[base + i];
    sum += static_cast<double>(v) * static_cast<double>(v);
  }
  sum = warp_sum(sum);
  if (tid % kWarp == 0) partial[tid / kWarp] = sum;
  __syncthreads();
  double total = 0.0;
#pragma unroll
  for (int i = 0; i < kNormThreads / kWarp; ++i) total += partial[i];  // same order in all threads
  const float mean = static_cast<float>(total / static_cast<double>(dim));
  const float scale = 1.0f / sqrtf(mean + eps);
  for (int i = tid; i < dim; i += kNormThreads) out[base + i] = (x[base + i] * scale) * weight[i];
}

// ---- element-wise -------------------------------------------------------------------------

__global__ void add_row_kernel(float* y, const float* bias, size_t total, size_t dim) {
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[e] += bias[e % dim];
  }
}

__global__ void add_kernel(const float* a, const float* b, size_t n, float* out) {
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    out[e] = a[e] + b[e];
  }
}

__global__ void silu_mul_kernel(const float* gate, const float* up, size_t n, float* out) {
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float g = gate[e];
    out[e] = g / (1.0f + expf(-g)) * up[e];
  }
}

__global__ void scale_rows_by_sigmoid_kernel(float* rows, const float* logit, size_t total,
                                             size_t dim) {
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<size_t>(gridDim.x) * blockDim.x) {
    rows[e] *= 1.0f / (1.0f + expf(-logit[e / dim]));
  }
}

unsigned elem_blocks(size_t n) {
  return static_cast<unsigned>(
      std::min<size_t>((n + kElemThreads - 1) / kElemThreads, kMaxElemBlocks));
}

// ---- RoPE ---------------------------------------------------------------------------------

// The angle and scale of rope_enqueue without the pair layout (kernel arguments by value).
struct RopeParams {
  int n_heads;
  int head_dim;
  int offset;
  int rot;
  bool neox;
  float freq_base;
  float freq_scale;
  float ext_factor;
  float corr_low;
  float corr_high;
  double mscale;
};

// One block per token; a thread takes pairs i, computes the angle once (as kernels::rope: inv_freq
// in double rounded to float, theta in float, cos/sin in double scaled by mscale, rounded to float)
// and rotates pair i of every head. The products and sums are __fmul_rn / __fadd_rn so no FMA
// contraction changes the CPU's rounding.
__global__ void __launch_bounds__(kRopeThreads)
    rope_kernel(float* x, RopeParams r, const int32_t* positions) {
  const size_t t = blockIdx.x;
  const int half = r.rot / 2;
  const float pos = static_cast<float>(positions[t]);
  const bool yarn = r.ext_factor != 0.0f;
  for (int i = static_cast<int>(threadIdx.x); i < half; i += kRopeThreads) {
    const double exponent = -2.0 * static_cast<double>(i) / static_cast<double>(r.rot);
    const float inv_freq = static_cast<float>(pow(static_cast<double>(r.freq_base), exponent));
    const float theta_e = __fmul_rn(pos, inv_freq);
    const float theta_i = __fmul_rn(r.freq_scale, theta_e);
    float theta = theta_i;
    if (yarn) {
      const float y = __fdiv_rn(__fsub_rn(static_cast<float>(i), r.corr_low),
                                fmaxf(0.001f, __fsub_rn(r.corr_high, r.corr_low)));
      const float ramp = __fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y)));
      const float mix = __fmul_rn(ramp, r.ext_factor);
      const float keep = __fsub_rn(1.0f, mix);
      theta = __fadd_rn(__fmul_rn(theta_i, keep), __fmul_rn(theta_e, mix));
    }
    double s = 0.0;
    double c = 0.0;
    sincos(static_cast<double>(theta), &s, &c);
    const float cs = static_cast<float>(c * r.mscale);
    const float sn = static_cast<float>(s * r.mscale);
    const int ia = r.offset + (r.neox ? i : 2 * i);
    const int ib = r.offset + (r.neox ? i + half : 2 * i + 1);
    for (int h = 0; h < r.n_heads; ++h) {
      float* head = x + (t * static_cast<size_t>(r.n_heads) + h) * static_cast<size_t>(r.head_dim);
      const float a0 = head[ia];
      const float b0 = head[ib];
      head[ia] = __fsub_rn(__fmul_rn(a0, cs), __fmul_rn(b0, sn));
      head[ib] = __fadd_rn(__fmul_rn(a0, sn), __fmul_rn(b0, cs));
    }
  }
}

}  // namespace

namespace dense_internal {

Status launch_status(const char* what) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return internal_error(std::string("CUDA ") + what +
                          " launch failed: " + cudaGetErrorString(err));
  }
  return Status();
}

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace dense_internal

using dense_internal::launch_status;
using dense_internal::overlaps;

bool dense_matmul_supports(TensorType type) {
  return find_cuda_weight_type(type) != nullptr;
}

Status matmul_enqueue(const DeviceMatrix& w, const float* x, size_t n_tokens, float* y,
                      void* stream) {
  return batched_matmul_enqueue(w, MatmulBatch{}, x, n_tokens, y, stream);
}

Status batched_matmul_enqueue(const DeviceMatrix& w, const MatmulBatch& batch, const float* x,
                              size_t n_tokens, float* y, void* stream_ptr) {
  TANDEM_RETURN_IF_ERROR(check_cuda_weight_cols(w.type, w.cols, "CUDA matmul", "cols"));
  if (w.rows == 0 || w.cols == 0 || w.rows > kMaxDim || w.cols > kMaxDim) {
    return invalid_argument_error("CUDA matmul: matrix " + std::to_string(w.rows) + " x " +
                                  std::to_string(w.cols) + " out of range (1 .. 2^30 each)");
  }
  if (n_tokens > kMaxDim) {
    return invalid_argument_error("CUDA matmul: " + std::to_string(n_tokens) +
                                  " tokens out of range");
  }
  const size_t n_batches = batch.n_batches;
  if (n_batches == 0 || n_batches > kMaxGridY) {
    return invalid_argument_error("CUDA matmul: " + std::to_string(n_batches) +
                                  " batches out of range (1 .. 65535)");
  }
  const size_t x_ld = batch.x_ld != 0 ? batch.x_ld : w.cols * n_batches;
  const size_t y_ld = batch.y_ld != 0 ? batch.y_ld : w.rows * n_batches;
  const size_t x_step = batch.x_batch != 0 ? batch.x_batch : w.cols;
  const size_t y_step = batch.y_batch != 0 ? batch.y_batch : w.rows;
  if (x_ld > kMaxDim || y_ld > kMaxDim || x_step > kMaxDim || y_step > kMaxDim ||
      (n_batches > 1 && (x_step < w.cols || y_step < w.rows))) {
    return invalid_argument_error("CUDA matmul: batch strides out of range or overlapping");
  }
  // The last float each side touches, plus one.
  const size_t x_span = (n_batches - 1) * x_step + w.cols;
  const size_t y_span = (n_batches - 1) * y_step + w.rows;
  if (x_span > x_ld || y_span > y_ld) {
    return invalid_argument_error("CUDA matmul: a token's batches (" + std::to_string(x_span) +
                                  " / " + std::to_string(y_span) +
                                  " floats) are wider than its row stride");
  }
  if (n_tokens == 0) return Status();
  if (w.data == nullptr || x == nullptr || y == nullptr) {
    return invalid_argument_error("CUDA matmul: null pointer");
  }
  const size_t align = find_cuda_weight_type(w.type)->alignment;
  if (reinterpret_cast<uintptr_t>(w.data) % align != 0) {
    return invalid_argument_error("CUDA matmul: weights not aligned to " + std::to_string(align) +
                                  " bytes");
  }
  const size_t x_floats = (n_tokens - 1) * x_ld + x_span;
  const size_t y_floats = (n_tokens - 1) * y_ld + y_span;
  if (overlaps(x, x_floats * sizeof(float), y, y_floats * sizeof(float))) {
    return invalid_argument_error("CUDA matmul: y overlaps x");
  }
  TANDEM_ASSIGN_OR_RETURN(const size_t row_bytes, tensor_type_bytes(w.type, w.cols));
  if (n_batches > 1 && (row_bytes * w.rows) % align != 0) {
    return invalid_argument_error("CUDA matmul: a batch's weights are not aligned to " +
                                  std::to_string(align) + " bytes");
  }
  const MatmulStrides st{x_ld, y_ld, x_step, y_step, row_bytes * w.rows};
  auto* stream = static_cast<cudaStream_t>(stream_ptr);
  dispatch_cuda_weight_type(w.type, [&](auto type) {
    launch_matmul<decltype(type)::value>(w, row_bytes, x, n_tokens, y, st,
                                         static_cast<unsigned>(n_batches), stream);
  });
  return launch_status("matmul");
}

Status rms_norm_enqueue(const float* x, const float* weight, float eps, size_t n_rows, size_t dim,
                        float* out, void* stream) {
  return rms_norm_strided_enqueue(x, weight, eps, n_rows, dim, dim, out, stream);
}

Status rms_norm_strided_enqueue(const float* x, const float* weight, float eps, size_t n_rows,
                                size_t dim, size_t stride, float* out, void* stream) {
  if (dim == 0 || dim > kMaxDim || stride < dim || stride > kMaxDim) {
    return invalid_argument_error("CUDA rms_norm: dim " + std::to_string(dim) + ", stride " +
                                  std::to_string(stride) + " out of range");
  }
  if (n_rows > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument_error("CUDA rms_norm: " + std::to_string(n_rows) +
                                  " rows out of range");
  }
  if (n_rows == 0) return Status();
  if (x == nullptr || weight == nullptr || out == nullptr) {
    return invalid_argument_error("CUDA rms_norm: null pointer");
  }
  TANDEM_CUDA_LAUNCH(static_cast<unsigned>(n_rows), kNormThreads, static_cast<cudaStream_t>(stream),
                     rms_norm_kernel)
  (x, weight, eps, static_cast<int>(dim), stride, out);
  return launch_status("rms_norm");
}

Status add_row_enqueue(float* y, const float* bias, size_t n_rows, size_t dim, void* stream) {
  if (dim == 0) return invalid_argument_error("CUDA add_row: dim is zero");
  if (n_rows > SIZE_MAX / dim) return invalid_argument_error("CUDA add_row: size overflows");
  if (n_rows == 0) return Status();
  if (y == nullptr || bias == nullptr) return invalid_argument_error("CUDA add_row: null pointer");
  const size_t total = n_rows * dim;
  TANDEM_CUDA_LAUNCH(elem_blocks(total), kElemThreads, static_cast<cudaStream_t>(stream),
                     add_row_kernel)
  (y, bias, total, dim);
  return launch_status("add_row");
}

Status add_enqueue(const float* a, const float* b, size_t n, float* out, void* stream) {
  if (n == 0) return Status();
  if (a == nullptr || b == nullptr || out == nullptr) {
    return invalid_argument_error("CUDA add: null pointer");
  }
  TANDEM_CUDA_LAUNCH(elem_blocks(n), kElemThreads, static_cast<cudaStream_t>(stream), add_kernel)
  (a, b, n, out);
  return launch_status("add");
}

Status silu_mul_enqueue(const float* gate, const float* up, size_t n, float* out, void* stream) {
  if (n == 0) return Status();
  if (gate == nullptr || up == nullptr || out == nullptr) {
    return invalid_argument_error("CUDA silu_mul: null pointer");
  }
  TANDEM_CUDA_LAUNCH(elem_blocks(n), kElemThreads, static_cast<cudaStream_t>(stream),
                     silu_mul_kernel)
  (gate, up, n, out);
  return launch_status("silu_mul");
}

Status scale_rows_by_sigmoid_enqueue(float* rows, const float* logit, size_t n_rows, size_t dim,
                                     void* stream) {
  if (dim == 0) return invalid_argument_error("CUDA scale_rows_by_sigmoid: dim is zero");
  if (n_rows > SIZE_MAX / dim) {
    return invalid_argument_error("CUDA scale_rows_by_sigmoid: size overflows");
  }
  if (n_rows == 0) return Status();
  if (rows == nullptr || logit == nullptr) {
    return invalid_argument_error("CUDA scale_rows_by_sigmoid: null pointer");
  }
  const size_t total = n_rows * dim;
  TANDEM_CUDA_LAUNCH(elem_blocks(total), kElemThreads, static_cast<cudaStream_t>(stream),
                     scale_rows_by_sigmoid_kernel)
  (rows, logit, total, dim);
  return launch_status("scale_rows_by_sigmoid");
}

Status rope_enqueue(float* x, size_t n_tokens, size_t n_heads, const int32_t* positions,
                    const DeviceRope& rope, void* stream) {
  if (rope.head_dim == 0 || rope.head_dim > kMaxDim || rope.rot_dims == 0 ||
      rope.rot_dims % 2 != 0 || rope.offset > rope.head_dim ||
      rope.rot_dims > rope.head_dim - rope.offset) {
    return invalid_argument_error("CUDA rope: head_dim " + std::to_string(rope.head_dim) +
                                  ", offset " + std::to_string(rope.offset) + ", rot_dims " +
                                  std::to_string(rope.rot_dims) +
                                  " (rot_dims must be even, 0 < rot_dims <= head_dim - offset)");
  }
  if (!(rope.freq_base > 0.0f) || !(rope.freq_scale > 0.0f) || !std::isfinite(rope.mscale)) {
    return invalid_argument_error(
        "CUDA rope: freq_base and freq_scale must be positive and mscale finite");
  }
  if (n_heads == 0 || n_heads > kMaxDim || n_heads * rope.head_dim > kMaxDim) {
    return invalid_argument_error("CUDA rope: " + std::to_string(n_heads) + " heads out of range");
  }
  if (n_tokens > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument_error("CUDA rope: " + std::to_string(n_tokens) +
                                  " tokens out of range");
  }
  if (n_tokens == 0) return Status();
  if (x == nullptr || positions == nullptr)
    return invalid_argument_error("CUDA rope: null pointer");
  RopeParams r{};
  r.n_heads = static_cast<int>(n_heads);
  r.head_dim = static_cast<int>(rope.head_dim);
  r.offset = static_cast<int>(rope.offset);
  r.rot = static_cast<int>(rope.rot_dims);
  r.neox = rope.neox;
  r.freq_base = rope.freq_base;
  r.freq_scale = rope.freq_scale;
  r.ext_factor = rope.ext_factor;
  r.corr_low = rope.corr_low;
  r.corr_high = rope.corr_high;
  r.mscale = rope.mscale;
  TANDEM_CUDA_LAUNCH(static_cast<unsigned>(n_tokens), kRopeThreads,
                     static_cast<cudaStream_t>(stream), rope_kernel)
  (x, r, positions);
  return launch_status("rope");
}

}  // namespace tandem::kernels::cuda
