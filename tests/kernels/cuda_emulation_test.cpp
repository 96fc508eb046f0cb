// The host emulation of the CUDA kernels (kernels/cuda/emulation) against what CUDA specifies:
// thread and block coordinates, __syncthreads (threads that returned count as arrived, as on the
// hardware), warp shuffles, and the errors CUDA reports (bad copies, launch shapes, streams,
// memory); and that it refuses, instead of passing, what the hardware leaves undefined: a shuffle
// naming a lane that has returned or waits at __syncthreads, and (by a wrong result) a read of
// shared memory without a barrier.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <limits>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/cuda/launch.cuh"

namespace {

// Each thread writes its coordinates, flattened, at its global index.
__global__ void coords_kernel(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  out[block * n + thread] = block * 1000 + thread;
}

// Block sum of in[]: each warp reduces with xor shuffles, warp sums meet in shared memory.
__global__ void block_sum_kernel(const int* in, int* out) {
  __shared__ int warp_sums[32];
  const unsigned tid = threadIdx.x;
  int v = in[blockIdx.x * blockDim.x + tid];
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  if (tid % 32 == 0) warp_sums[tid / 32] = v;
  __syncthreads();
  if (tid == 0) {
    int s = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) s += warp_sums[w];
    out[blockIdx.x] = s;
  }
}

// Reads a neighbour's shared value with no barrier in between: a race on the hardware.
__global__ void missing_barrier_kernel(const int* in, int* out) {
  __shared__ int s[64];
  const unsigned tid = threadIdx.x;
  s[tid] = in[tid];
  out[tid] = s[(tid + 1) % blockDim.x];
}

// Half a warp waits at __syncthreads while the other half shuffles with the full warp's mask.
__global__ void divergent_barrier_kernel(int* out) {
  int v = static_cast<int>(threadIdx.x);
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  }
  out[threadIdx.x] = v;
}

// Half the warp returns, the other half shuffles with the full mask.
__global__ void exited_lane_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

// Threads that return early count as arrived at a later __syncthreads (no deadlock).
__global__ void early_return_kernel(int* out) {
  __shared__ int first;
  if (threadIdx.x >= 40) return;
  if (threadIdx.x == 0) first = 7;
  __syncthreads();
  out[threadIdx.x] = first + static_cast<int>(threadIdx.x);
}

// Each thread writes one int at out[offset + thread].
__global__ void write_at_kernel(int* out, int offset) {
  out[offset + static_cast<int>(threadIdx.x)] = 1;
}

template <typename T>
T* device_alloc(size_t n) {
  T* p = nullptr;
  REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
  return p;
}

template <typename T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

TEST_CASE("emulated CUDA: every thread of a 3-D grid of 3-D blocks runs once with its coordinates",
          "[cuda-emulation]") {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const size_t n = 12 * 24;
  unsigned* out = device_alloc<unsigned>(n);
  TANDEM_CUDA_LAUNCH(grid, block, nullptr, coords_kernel)(out);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<unsigned> got = download(out, n);
  for (size_t b = 0; b < 12; ++b) {
    for (size_t t = 0; t < 24; ++t) CHECK(got[b * 24 + t] == b * 1000 + t);
  }
  CHECK(cudaFree(out) == cudaSuccess);
}

TEST_CASE("emulated CUDA: warp shuffles and __syncthreads give the block sums",
          "[cuda-emulation]") {
  const unsigned blocks = 5, threads = 256;
  std::vector<int> in(blocks * threads);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int>(i * 7 % 13) - 6;
  int* d_in = device_alloc<int>(in.size());
  int* d_out = device_alloc<int>(blocks);
  REQUIRE(cudaMemcpy(d_in, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice) ==
          cudaSuccess);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  TANDEM_CUDA_LAUNCH(blocks, threads, stream, block_sum_kernel)(d_in, d_out);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  const std::vector<int> got = download(d_out, blocks);
  for (unsigned b = 0; b < blocks; ++b) {
    int want = 0;
    for (unsigned t = 0; t < threads; ++t) want += in[b * threads + t];
    CHECK(got[b] == want);
  }
  CHECK(cudaStreamDestroy(stream) == cudaSuccess);
  CHECK(cudaFree(d_in) == cudaSuccess);
  CHECK(cudaFree(d_out) == cudaSuccess);
}

TEST_CASE("emulated CUDA: a shared-memory read without a barrier gives a wrong result",
          "[cuda-emulation]") {
  // Blocks alternate the order their threads start in, so within two launches some thread reads
  // its neighbour's slot before the neighbour writes it this launch.
  const unsigned n = 64;
  int* d_in = device_alloc<int>(n);
  int* d_out = device_alloc<int>(n);
  bool wrong = false;
  for (int launch = 0; launch < 2; ++launch) {
    std::vector<int> in(n);
    for (unsigned i = 0; i < n; ++i) in[i] = static_cast<int>(i) + 100 * (launch + 1);
    REQUIRE(cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice) == cudaSuccess);
    TANDEM_CUDA_LAUNCH(1, n, nullptr, missing_barrier_kernel)(d_in, d_out);
    const std::vector<int> got = download(d_out, n);
    for (unsigned i = 0; i < n; ++i) wrong = wrong || got[i] != in[(i + 1) % n];
  }
  CHECK(wrong);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST_CASE("emulated CUDA: threads that returned count as arrived at __syncthreads",
          "[cuda-emulation]") {
  int* out = device_alloc<int>(64);
  TANDEM_CUDA_LAUNCH(1, 64, nullptr, early_return_kernel)(out);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  const std::vector<int> got = download(out, 40);
  for (int i = 0; i < 40; ++i) CHECK(got[static_cast<size_t>(i)] == 7 + i);
  cudaFree(out);
}

TEST_CASE("emulated CUDA: undefined barriers and shuffles fail the launch with a sticky error",
          "[cuda-emulation]") {
  SECTION("a shuffle names lanes that wait at __syncthreads") {
    int* out = device_alloc<int>(32);
    TANDEM_CUDA_LAUNCH(1, 32, nullptr, divergent_barrier_kernel)(out);
  }
  SECTION("a shuffle names a lane that has returned") {
    int* out = device_alloc<int>(32);
    TANDEM_CUDA_LAUNCH(1, 32, nullptr, exited_lane_kernel)(out);
  }
  CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
  // Sticky, as a faulting kernel leaves a CUDA context: every later call fails.
  void* p = nullptr;
  CHECK(cudaMalloc(&p, 16) == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
  REQUIRE(cudaDeviceReset() == cudaSuccess);
  CHECK(cudaMalloc(&p, 16) == cudaSuccess);
  CHECK(cudaFree(p) == cudaSuccess);
}

TEST_CASE("emulated CUDA: copies, frees, streams and launch shapes are checked as CUDA checks them",
          "[cuda-emulation]") {
  int* dev = device_alloc<int>(64);  // 256 bytes
  std::vector<int> host(128, 1);
  SECTION("a copy in the wrong direction") {
    CHECK(cudaMemcpy(host.data(), dev, 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(dev, host.data(), 64, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    CHECK(cudaMemcpy(host.data(), host.data() + 64, 64, cudaMemcpyDeviceToDevice) ==
          cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaSuccess);  // not sticky
    CHECK(cudaMemcpy(dev, host.data(), 64, cudaMemcpyDefault) == cudaSuccess);
  }
  SECTION("a copy past the allocation's end") {
    CHECK(cudaMemcpy(dev + 32, host.data(), 129 * sizeof(int) / 2 + 64, cudaMemcpyHostToDevice) ==
          cudaErrorInvalidValue);
    CHECK(cudaMemcpy(dev + 32, host.data(), 32 * sizeof(int), cudaMemcpyHostToDevice) ==
          cudaSuccess);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);  // a success does not clear it
  }
  SECTION("freeing what is not a device allocation") {
    CHECK(cudaFree(host.data()) == cudaErrorInvalidValue);
    CHECK(cudaFree(dev + 1) == cudaErrorInvalidValue);
    CHECK(cudaFreeHost(dev) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  }
  SECTION("a destroyed stream") {
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
    REQUIRE(cudaStreamDestroy(s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaErrorInvalidResourceHandle);
    CHECK(cudaMemcpyAsync(dev, host.data(), 16, cudaMemcpyHostToDevice, s) ==
          cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    TANDEM_CUDA_LAUNCH(1, 32, s, early_return_kernel)(dev);
    CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  }
  SECTION("a block of more than 1024 threads, an empty grid") {
    TANDEM_CUDA_LAUNCH(1, dim3(64, 32), nullptr, early_return_kernel)(dev);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    TANDEM_CUDA_LAUNCH(0, 32, nullptr, early_return_kernel)(dev);
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  }
  SECTION("more memory than the device has") {
    size_t free_bytes = 0, total = 0;
    REQUIRE(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
    CHECK(free_bytes + 256 == total);
    void* p = nullptr;
    CHECK(cudaMalloc(&p, free_bytes + 1) == cudaErrorMemoryAllocation);
    CHECK(p == nullptr);
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  }
  CHECK(cudaFree(dev) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

// Runs write_at_kernel over a 256-byte allocation in a child process; its exit signal (0 if none).
int signal_of_write_at(int offset) {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGSEGV, SIG_DFL);  // die of the fault, without Catch2's report of it
    int* out = nullptr;
    if (cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) _exit(2);
    TANDEM_CUDA_LAUNCH(1, 64, nullptr, write_at_kernel)(out, offset);
    _exit(cudaDeviceSynchronize() == cudaSuccess ? 0 : 3);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  if (WIFSIGNALED(status)) return WTERMSIG(status);
  CHECK(WEXITSTATUS(status) == 0);
  return 0;
}

TEST_CASE("emulated CUDA: a kernel writing past a device allocation faults", "[cuda-emulation]") {
  CHECK(signal_of_write_at(0) == 0);        // the whole allocation
  CHECK(signal_of_write_at(1) == SIGSEGV);  // one int past its end
}

// The value of a finite half's bits, by its definition (exact in double).
double half_value(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const double mantissa = bits & 0x3ff;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024.0 + mantissa, exponent - 25);
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

TEST_CASE("emulated CUDA: __half conversions are IEEE's (exact widening, nearest-even narrowing)",
          "[cuda-emulation]") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = __half2float(__half{bits});
    if ((bits & 0x7c00) == 0x7c00) {  // inf and NaN stay so, sign kept
      CHECK(((bits & 0x3ff) == 0 ? std::isinf(f) : std::isnan(f)));
      CHECK(std::signbit(f) == ((bits & 0x8000) != 0));
      continue;
    }
    REQUIRE(static_cast<double>(f) == half_value(bits));
    REQUIRE(__float2half_rn(f).bits == bits);  // every half is a float and comes back
  }
  // Narrowing: the nearest half, ties to the even one, over a spread of floats from below the
  // least subnormal half to past the largest half; 65520 and up round to infinity.
  for (uint64_t x = 0x32000000; x <= 0x47800100; x += 4093) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(x));
    const uint16_t q = __float2half_rn(f).bits;
    if (f >= 65520.0f) {
      CHECK(q == 0x7c00);
      continue;
    }
    REQUIRE(q < 0x7c00);
    const double d = f;
    const double err = std::fabs(d - half_value(q));
    if (q > 0) CHECK(err <= std::fabs(d - half_value(static_cast<uint16_t>(q - 1))));
    const double up = q + 1 < 0x7c00 ? std::fabs(d - half_value(static_cast<uint16_t>(q + 1)))
                                     : std::numeric_limits<double>::infinity();
    CHECK(err <= up);
    if (q > 0 && err == std::fabs(d - half_value(static_cast<uint16_t>(q - 1)))) {
      CHECK(q % 2 == 0);
    }
    if (err == up) CHECK(q % 2 == 0);
    CHECK(__float2half_rn(-f).bits == (q | 0x8000));
  }
  CHECK(__float2half_rn(65519.996f).bits == 0x7bff);
  CHECK(__float2half_rn(std::ldexp(1.0f, -25)).bits == 0);  // a tie with zero: even
  CHECK(__float2half_rn(std::ldexp(1.5f, -25)).bits == 1);  // nearer the least subnormal
  CHECK(__float2half_rn(std::ldexp(3.0f, -25)).bits == 2);  // 1.5 units: tie, even
  CHECK(__float2half_rn(1.0f + std::ldexp(1.0f, -11)).bits == 0x3c00);  // tie: even
  CHECK(std::isnan(__half2float(__float2half_rn(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("emulated CUDA: one device, described", "[cuda-emulation]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 1);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(std::string(prop.name).find("emulation") != std::string::npos);
  CHECK(prop.warpSize == 32);
  CHECK(cudaSetDevice(1) == cudaErrorInvalidDevice);
  CHECK(cudaGetErrorString(cudaErrorInvalidDevice) == std::string("invalid device ordinal"));
  cudaGetLastError();
}

}  // namespace
