// dequantize(): scalar reference conversion of GGUF/safetensors tensor data to float32.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels {

// Whether dequantize() converts `type`.
bool dequantize_supported(TensorType type);

// "f32, f16, bf16, ..." — the types dequantize() converts, for error messages and docs.
std::string dequantize_supported_names();

// Converts dst.size() elements of `type`, stored at src in the type's little-endian block layout
// (no alignment needed), into dst. src must be exactly tensor_type_bytes(type, dst.size()) bytes:
// INVALID_ARGUMENT naming both sizes otherwise (also when dst.size() is not a whole number of
// blocks). UNIMPLEMENTED naming the type and the supported ones for a type without a routine.
// This is the correctness reference for the SIMD/CUDA kernels: plain scalar float math in the
// same order as ggml's reference dequantizers (no FMA contraction), so results are bit-equal to
// gguf-py's numpy dequantize. The caller owns both buffers; they must not overlap. Thread-safe
// (no shared state).
Status dequantize(TensorType type, std::span<const uint8_t> src, std::span<float> dst);

}  // namespace tandem::kernels
