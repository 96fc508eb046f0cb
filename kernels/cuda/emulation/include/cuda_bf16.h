// cuda_bf16.h of the CUDA emulation (kernels/cuda/emulation): empty, as the kernels read bfloat16
// as bits (the top half of a float) and use none of the header's types.
#pragma once
