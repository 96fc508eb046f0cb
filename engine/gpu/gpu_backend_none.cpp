// The GPU backend of a build without CUDA: no devices, and every GPU object refused by name.
#include <string>

#include "engine/gpu/gpu_backend.h"

namespace tandem::gpu {
namespace {

Status not_built(const std::string& what) {
  return unimplemented_error(what +
                             ": this build has no GPU backend (configure with -DTANDEM_CUDA=ON "
                             "on a machine with nvcc)");
}

}  // namespace

std::string_view backend_name() {
  return "";
}

Result<std::vector<DeviceInfo>> list_devices() {
  return std::vector<DeviceInfo>();
}

Result<DeviceMemory> device_memory(int device) {
  return not_built("the memory of GPU device " + std::to_string(device));
}

uint64_t expert_scratch_bytes(size_t, size_t, size_t, size_t, size_t) {
  return 0;
}

Result<GpuExperts> create_expert_worker(const model::ModelSpec&, const model::ModelWeights&,
                                        const experts::ExpertMap&, const ExpertWorkerOptions&) {
  return not_built("GPU experts");
}

Result<GpuDense> create_dense_executor(const model::ModelSpec&, const model::ModelWeights&,
                                       runtime::KvPool&, const DenseOptions&) {
  return not_built("the dense parts on the GPU");
}

}  // namespace tandem::gpu
