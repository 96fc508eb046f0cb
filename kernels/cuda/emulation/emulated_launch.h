// TANDEM_CUDA_LAUNCH under the CUDA emulation (kernels/cuda/launch.cuh): launch(name, grid, block,
// stream, kernel)(args...) converts the arguments to the kernel's parameter types, as a CUDA launch
// copies them, and runs the grid (emulated_runtime.h's launch_grid) before returning.
#pragma once

#include <tuple>
#include <utility>

#include "kernels/cuda/emulation/emulated_runtime.h"

namespace tandem::cuda_emulation {

template <typename... Params>
class KernelLaunch {
 public:
  KernelLaunch(const char* name, dim3 grid, dim3 block, cudaStream_t stream,
               void (*kernel)(Params...))
      : name_(name), grid_(grid), block_(block), stream_(stream), kernel_(kernel) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    struct Call {
      void (*kernel)(Params...);
      std::tuple<Params...> params;
    } call{kernel_, std::tuple<Params...>(std::forward<Args>(args)...)};
    launch_grid(
        name_, grid_, block_, stream_,
        [](void* c) {
          const Call& self = *static_cast<const Call*>(c);
          std::apply(self.kernel, self.params);
        },
        &call);
  }

 private:
  const char* name_;
  dim3 grid_, block_;
  cudaStream_t stream_;
  void (*kernel_)(Params...);
};

template <typename... Params>
KernelLaunch<Params...> launch(const char* name, dim3 grid, dim3 block, cudaStream_t stream,
                               void (*kernel)(Params...)) {
  return KernelLaunch<Params...>(name, grid, block, stream, kernel);
}

}  // namespace tandem::cuda_emulation
