// The weight types the CUDA matmul and expert FFN kernels dequantize in-kernel: the one list of
// them (with the block shape and pointer alignment the kernels rely on), the "supported" names
// built from it, the launchers' shape check and the compile-time type dispatch.
//
// Plain C++ (no CUDA): host code of .cu and .cpp files may include it. Adding a type means one row
// of kCudaWeightTypes plus its branch of weight_load::load8; everything else follows the list.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <utility>

#include "base/status.h"
#include "kernels/tensor_type.h"

namespace tandem::kernels::cuda {

// One weight type the kernels take. block_elements / block_bytes repeat the type's TensorTypeTraits
// as compile-time constants for the device code (tests/kernels/cuda_dense_ops_test.cpp checks that
// they agree). alignment: what the weight pointer (and so, given the block size, every row) must be
// aligned to: the widest element load of the type's conversion (Q4_0, Q4_1, Q5_0, Q5_1, MXFP4 and
// the K-quants are read byte by byte and need none).
struct CudaWeightType {
  TensorType type;
  uint32_t block_elements;  // a row must hold whole blocks: cols % block_elements == 0
  uint32_t block_bytes;
  uint32_t alignment;
};

inline constexpr CudaWeightType kCudaWeightTypes[] = {
    {TensorType::kF32, 1, 4, 4},
    {TensorType::kF16, 1, 2, 2},
    {TensorType::kBF16, 1, 2, 2},
    {TensorType::kQ8_0, 32, 34, 2},
    {TensorType::kQ4_0, 32, 18, 1},
    {TensorType::kQ4_1, 32, 20, 1},
    {TensorType::kQ5_0, 32, 22, 1},
    {TensorType::kQ5_1, 32, 24, 1},
    {TensorType::kMXFP4, 32, 17, 1},
    {TensorType::kQ4_K, 256, 144, 1},
    {TensorType::kQ5_K, 256, 176, 1},
    {TensorType::kQ6_K, 256, 210, 1},
    {TensorType::kF8_E4M3_B128, 128, 132, 1},
};

// The row of `type`, or null when the kernels do not take it.
constexpr const CudaWeightType* find_cuda_weight_type(TensorType type) {
  for (const CudaWeightType& t : kCudaWeightTypes) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

// The row of a listed type, at compile time (a compile error for an unlisted one).
template <TensorType T>
inline constexpr CudaWeightType kCudaWeightTypeOf = *find_cuda_weight_type(T);

// The listed types' names (tensor_type_name), comma-separated in list order, as used in the
// "supported: ..." part of the errors.
inline std::string cuda_weight_type_names() {
  std::string names;
  for (const CudaWeightType& t : kCudaWeightTypes) {
    if (!names.empty()) names += ", ";
    names += tensor_type_name(t.type);
  }
  return names;
}

// OK when a listed `type` can hold rows of `cols` elements (whole blocks); otherwise
// INVALID_ARGUMENT "<where>: <type> needs <what> to be a multiple of <block>, got <cols>", or
// "<where>: unsupported weight type <type> (supported: ...)" for an unlisted type.
inline Status check_cuda_weight_cols(TensorType type, size_t cols, const std::string& where,
                                     const char* what) {
  const CudaWeightType* t = find_cuda_weight_type(type);
  if (t == nullptr) {
    return invalid_argument_error(where + ": unsupported weight type " +
                                  std::string(tensor_type_name(type)) +
                                  " (supported: " + cuda_weight_type_names() + ")");
  }
  if (cols % t->block_elements != 0) {
    return invalid_argument_error(where + ": " + std::string(tensor_type_name(type)) + " needs " +
                                  what + " to be a multiple of " +
                                  std::to_string(t->block_elements) + ", got " +
                                  std::to_string(cols));
  }
  return Status();
}

// The type dispatch shared by the launchers: calls f(std::integral_constant<TensorType, T>{}) for
// the listed T == type and returns true; returns false (and calls nothing) for an unlisted type.
// f instantiates its kernels for every listed type.
template <typename F>
bool dispatch_cuda_weight_type(TensorType type, F&& f) {
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return ((type == kCudaWeightTypes[I].type
                 ? (f(std::integral_constant<TensorType, kCudaWeightTypes[I].type>{}), true)
                 : false) ||
            ...);
  }
  (std::make_index_sequence<std::size(kCudaWeightTypes)>{});
}

}  // namespace tandem::kernels::cuda
