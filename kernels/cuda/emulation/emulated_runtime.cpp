// The CUDA emulation's runtime API (emulated_runtime.h): an allocation registry that tells device
// memory from host memory, checked copies, streams as registered handles, launches on fibers.
#include "kernels/cuda/emulation/emulated_runtime.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "kernels/cuda/emulation/thread_blocks.h"

namespace tandem::cuda_emulation {
namespace {

constexpr size_t kDefaultMib = 8192;
constexpr size_t kDeviceAlignment = 256;  // cudaMalloc's guarantee

constexpr size_t kPage = 4096;

struct Allocation {
  size_t bytes = 0;
  bool device = false;
  void* mapping = nullptr;  // device memory: its mapping (the allocation ends at a guard page)
  size_t mapping_bytes = 0;
};

// Device memory ends at an inaccessible page, so a kernel reading or writing past an allocation
// (beyond the rounding to 256 bytes) faults where the hardware would read garbage or fault.
void* map_device(size_t rounded, Allocation* a) {
  a->mapping_bytes = (rounded + kPage - 1) / kPage * kPage + kPage;
  void* m = mmap(nullptr, a->mapping_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  char* guard = static_cast<char*>(m) + a->mapping_bytes - kPage;
  if (mprotect(guard, kPage, PROT_NONE) != 0) {
    munmap(m, a->mapping_bytes);
    return nullptr;
  }
  a->mapping = m;
  return guard - rounded;
}

void unmap(const Allocation& a, void* ptr) {
  if (a.mapping != nullptr) {
    munmap(a.mapping, a.mapping_bytes);
  } else {
    std::free(ptr);
  }
}

class Emulator {
 public:
  Emulator() {
    const char* mib = std::getenv("TANDEM_CUDA_EMULATION_MIB");
    size_t v = kDefaultMib;
    if (mib != nullptr && *mib != '\0') {
      char* end = nullptr;
      const unsigned long long parsed = std::strtoull(mib, &end, 10);
      if (end != nullptr && *end == '\0' && parsed > 0) v = static_cast<size_t>(parsed);
    }
    capacity_ = v * 1024 * 1024;
  }

  size_t capacity() const { return capacity_; }

  size_t free_bytes() {
    std::lock_guard lock(mu_);
    return capacity_ - device_bytes_;
  }

  cudaError_t allocate(void** ptr, size_t bytes, bool device) {
    if (ptr == nullptr) return cudaErrorInvalidValue;
    *ptr = nullptr;
    if (bytes == 0) return cudaSuccess;
    const size_t rounded = (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
    if (rounded < bytes) return cudaErrorMemoryAllocation;
    std::lock_guard lock(mu_);
    if (device && rounded > capacity_ - device_bytes_) return cudaErrorMemoryAllocation;
    Allocation a{rounded, device};
    void* p = device ? map_device(rounded, &a) : std::aligned_alloc(kDeviceAlignment, rounded);
    if (p == nullptr) return cudaErrorMemoryAllocation;
    if (device) {
      std::memset(p, 0xff, rounded);
      device_bytes_ += rounded;
    }
    allocations_[reinterpret_cast<uintptr_t>(p)] = a;
    *ptr = p;
    return cudaSuccess;
  }

  cudaError_t release(void* ptr, bool device) {
    if (ptr == nullptr) return cudaSuccess;
    std::lock_guard lock(mu_);
    const auto it = allocations_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == allocations_.end() || it->second.device != device) return cudaErrorInvalidValue;
    if (device) device_bytes_ -= it->second.bytes;
    unmap(it->second, ptr);
    allocations_.erase(it);
    return cudaSuccess;
  }

  // Whether [p, p + bytes) lies inside one device allocation, or (false) touches none: a range
  // straddling an allocation's end is reported through `partial`.
  bool in_device(const void* p, size_t bytes, bool* partial) {
    std::lock_guard lock(mu_);
    *partial = false;
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = allocations_.upper_bound(addr);
    if (it == allocations_.begin()) return false;
    --it;
    if (!it->second.device || addr >= it->first + it->second.bytes) return false;
    if (bytes > it->first + it->second.bytes - addr) {
      *partial = true;
      return false;
    }
    return true;
  }

  bool stream_ok(cudaStream_t s) {
    if (s == nullptr) return true;
    std::lock_guard lock(mu_);
    return streams_.count(s) != 0;
  }
  cudaStream_t create_stream() {
    std::lock_guard lock(mu_);
    auto* s = reinterpret_cast<cudaStream_t>(new char[1]);
    streams_.insert(s);
    return s;
  }
  bool destroy_stream(cudaStream_t s) {
    std::lock_guard lock(mu_);
    if (streams_.erase(s) == 0) return false;
    delete[] reinterpret_cast<char*>(s);
    return true;
  }

  void reset() {
    std::lock_guard lock(mu_);
    for (const auto& [addr, allocation] : allocations_) {
      unmap(allocation, reinterpret_cast<void*>(addr));
    }
    allocations_.clear();
    device_bytes_ = 0;
    for (cudaStream_t s : streams_) delete[] reinterpret_cast<char*>(s);
    streams_.clear();
    sticky_ = cudaSuccess;
  }

  cudaError_t sticky() {
    std::lock_guard lock(mu_);
    return sticky_;
  }
  void fail(const std::string& message) {
    std::lock_guard lock(mu_);
    std::fprintf(stderr, "CUDA emulation: %s\n", message.c_str());
    sticky_ = cudaErrorLaunchFailure;
  }

 private:
  std::mutex mu_;
  size_t capacity_ = 0;
  size_t device_bytes_ = 0;
  std::map<uintptr_t, Allocation> allocations_;
  std::set<cudaStream_t> streams_;
  cudaError_t sticky_ = cudaSuccess;
};

Emulator& emulator() {
  static Emulator e;
  return e;
}

thread_local cudaError_t t_last_error = cudaSuccess;

// Records err as this thread's last error (the sticky one wins) and returns it.
cudaError_t record(cudaError_t err) {
  const cudaError_t sticky = emulator().sticky();
  if (sticky != cudaSuccess) err = sticky;
  if (err != cudaSuccess) t_last_error = err;
  return err;
}

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                 cudaStream_t stream) {
  if (!emulator().stream_ok(stream)) return record(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return record(cudaSuccess);
  if (dst == nullptr || src == nullptr) return record(cudaErrorInvalidValue);
  bool dst_partial = false, src_partial = false;
  const bool dst_device = emulator().in_device(dst, bytes, &dst_partial);
  const bool src_device = emulator().in_device(src, bytes, &src_partial);
  if (dst_partial || src_partial) return record(cudaErrorInvalidValue);
  const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault && (dst_device != want_dst || src_device != want_src)) {
    return record(cudaErrorInvalidValue);
  }
  std::memmove(dst, src, bytes);
  return record(cudaSuccess);
}

}  // namespace

void launch_grid(const char* kernel, const dim3& grid, const dim3& block, cudaStream_t stream,
                 void (*body)(void*), void* context) {
  if (record(cudaSuccess) != cudaSuccess) return;
  if (!emulator().stream_ok(stream)) {
    record(cudaErrorInvalidResourceHandle);
    return;
  }
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > kMaxBlockThreads ||
      block.z > 64 || grid.y > 65535 || grid.z > 65535 || grid.x > 0x7fffffffu) {
    record(cudaErrorInvalidConfiguration);
    return;
  }
  const std::string error = run_grid(grid, block, body, context);
  if (!error.empty()) emulator().fail(std::string(kernel) + ": " + error);
}

}  // namespace tandem::cuda_emulation

using tandem::cuda_emulation::emulator;
using tandem::cuda_emulation::record;

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (the emulation printed why)";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() {
  const cudaError_t err = tandem::cuda_emulation::t_last_error;
  const cudaError_t sticky = emulator().sticky();
  tandem::cuda_emulation::t_last_error = sticky;
  return err != cudaSuccess ? err : sticky;
}

cudaError_t cudaPeekAtLastError() {
  const cudaError_t err = tandem::cuda_emulation::t_last_error;
  return err != cudaSuccess ? err : emulator().sticky();
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return record(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return record(cudaErrorInvalidValue);
  if (device != 0) return record(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof(prop->name), "Tandem CUDA emulation (host fibers)");
  prop->totalGlobalMem = emulator().capacity();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->warpSize = static_cast<int>(tandem::cuda_emulation::kWarpSize);
  prop->maxThreadsPerBlock = static_cast<int>(tandem::cuda_emulation::kMaxBlockThreads);
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return record(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return record(cudaErrorInvalidValue);
  *free_bytes = emulator().free_bytes();
  *total_bytes = emulator().capacity();
  return record(cudaSuccess);
}

cudaError_t cudaDeviceSynchronize() {
  return record(cudaSuccess);
}

cudaError_t cudaDeviceReset() {
  emulator().reset();
  tandem::cuda_emulation::t_last_error = cudaSuccess;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  return record(emulator().allocate(ptr, bytes, true));
}

cudaError_t cudaFree(void* ptr) {
  return record(emulator().release(ptr, true));
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if (flags != cudaHostAllocDefault) return record(cudaErrorInvalidValue);
  return record(emulator().allocate(ptr, bytes, false));
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return record(emulator().allocate(ptr, bytes, false));
}

cudaError_t cudaFreeHost(void* ptr) {
  return record(emulator().release(ptr, false));
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return tandem::cuda_emulation::copy(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  return tandem::cuda_emulation::copy(dst, src, bytes, kind, stream);
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                              size_t width, size_t height, cudaMemcpyKind kind,
                              cudaStream_t stream) {
  if (width > dst_pitch || width > src_pitch) return record(cudaErrorInvalidValue);
  for (size_t r = 0; r < height; ++r) {
    const cudaError_t err = tandem::cuda_emulation::copy(
        static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch,
        width, kind, stream);
    if (err != cudaSuccess) return err;
  }
  return record(cudaSuccess);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (stream == nullptr || flags > cudaStreamNonBlocking) return record(cudaErrorInvalidValue);
  *stream = emulator().create_stream();
  return record(cudaSuccess);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || !emulator().destroy_stream(stream)) {
    return record(cudaErrorInvalidResourceHandle);
  }
  return record(cudaSuccess);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!emulator().stream_ok(stream)) return record(cudaErrorInvalidResourceHandle);
  return record(cudaSuccess);
}
