// What the [cuda] kernel tests share: whether a device is there (a WARN saying the case is skipped
// where not), device arrays, random inputs and element-wise tolerances.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/cuda/device_info.h"

namespace tandem::kernels::cuda {

// True when a device is present; otherwise WARNs why the case does nothing.
inline bool have_device() {
  auto devices = list_devices();
  if (!devices.ok()) {
    WARN("no CUDA device: " << devices.status().message() << "; [cuda] case skipped");
    return false;
  }
  if (devices.value().empty()) {
    WARN("no CUDA device: cudaGetDeviceCount reports none; [cuda] case skipped");
    return false;
  }
  return true;
}

// A device array of n T's, freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&ptr_), std::max<size_t>(n, 1) * sizeof(T)) ==
            cudaSuccess);
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    REQUIRE(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  // Waits for the default stream, then copies the array back.
  std::vector<T> download() const {
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<T> host(n_);
    REQUIRE(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

inline std::vector<float> random_floats(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Checks |got[i] - want[i]| <= tol[i] for all i, reporting the worst element.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         const std::vector<double>& tol) {
  REQUIRE(got.size() == want.size());
  REQUIRE(tol.size() == want.size());
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ratio = std::fabs(static_cast<double>(got[i]) - want[i]) / tol[i];
    if (!(ratio <= worst)) {  // NaN counts as worst
      worst = std::isnan(ratio) ? INFINITY : ratio;
      at = i;
      if (std::isnan(ratio)) break;
    }
  }
  INFO("worst element " << at << ": got " << got[at] << ", want " << want[at] << ", tolerance "
                        << tol[at]);
  CHECK(worst <= 1.0);
}

// Relative tolerance rel * (1 + |want|) for every element.
inline std::vector<double> relative_tol(const std::vector<float>& want, double rel) {
  std::vector<double> tol(want.size());
  for (size_t i = 0; i < want.size(); ++i) tol[i] = rel * (1.0 + std::fabs(want[i]));
  return tol;
}

}  // namespace tandem::kernels::cuda
