// TANDEM_CUDA_LAUNCH(grid, block, stream, kernel)(args...): a kernel launch written once for nvcc
// and for the host emulation of the CUDA kernels (kernels/cuda/emulation, which g++ compiles and
// which cannot parse <<< >>>). With nvcc it is kernel<<<grid, block, 0, stream>>>(args...); under
// the emulation it runs the grid on the calling thread before returning. No dynamic shared memory.
// The kernel comes last so that a template-id with commas (k<T, true>) needs no parentheses.
#pragma once

#if defined(TANDEM_CUDA_EMULATION)
#include "kernels/cuda/emulation/emulated_launch.h"
#define TANDEM_CUDA_LAUNCH(grid, block, stream, ...) \
  ::tandem::cuda_emulation::launch(#__VA_ARGS__, grid, block, stream, __VA_ARGS__)
#else
#define TANDEM_CUDA_LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<grid, block, 0, stream>>>
#endif
