// Host helpers shared by the launchers of dense_ops.cu and dense_attention.cu (not a public API).
#pragma once

#include <cstddef>

#include "base/status.h"

namespace tandem::kernels::cuda::dense_internal {

// OK, or INTERNAL "CUDA <what> launch failed: <error>" when cudaGetLastError reports an error
// (a refused launch configuration, or a sticky error of earlier work). Calling thread's device.
Status launch_status(const char* what);

// Whether the byte ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte. Pure.
bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes);

}  // namespace tandem::kernels::cuda::dense_internal
