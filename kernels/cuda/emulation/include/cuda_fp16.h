// cuda_fp16.h of the CUDA emulation (kernels/cuda/emulation): __half and its conversions.
#pragma once

#include "kernels/cuda/emulation/emulated_half.h"
