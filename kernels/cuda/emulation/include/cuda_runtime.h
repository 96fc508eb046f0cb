// cuda_runtime.h of the CUDA emulation (kernels/cuda/emulation): found first on the include path
// of the emulated targets, so that kernels/cuda and its callers compile unchanged with g++.
#pragma once

#include "kernels/cuda/emulation/emulated_device.h"
#include "kernels/cuda/emulation/emulated_runtime.h"
