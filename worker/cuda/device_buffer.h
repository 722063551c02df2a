// RAII owners of CUDA memory: DeviceBuffer<T> (cudaMalloc/cudaFree) and
// PinnedBuffer<T> (cudaMallocHost/cudaFreeHost), move-only, with typed
// element counts. Allocation returns a CudaStatus instead of throwing; the
// bytes a DeviceBuffer holds are counted in a process-wide tally so that
// memory profiling can tell our own allocations from the rest (CUDA context,
// cuBLAS workspaces, other processes). Both are one template, CudaBuffer,
// over an allocator policy.
//
// Freeing does not synchronize: the owner must make sure no queued work still
// uses the memory (cudaFree itself waits for the device in practice, but
// pinned memory read by an in-flight cudaMemcpyAsync must not be reused).
//
// Thread-safety: a buffer is thread-compatible; the tally is atomic.
#ifndef FOLIO_WORKER_CUDA_DEVICE_BUFFER_H_
#define FOLIO_WORKER_CUDA_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "worker/cuda/cuda_status.h"

namespace folio::gpu {

// Bytes currently held by all DeviceBuffers of this process.
inline std::atomic<int64_t>& DeviceBytesInUse() {
  static std::atomic<int64_t> bytes{0};
  return bytes;
}

// Allocator policies: the default `what` for errors, how to allocate and
// free, and whether the bytes count in DeviceBytesInUse().
struct DeviceMemoryPolicy {
  static constexpr const char* kWhat = "cudaMalloc";
  static constexpr bool kCounted = true;
  static cudaError_t Alloc(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void Free(void* p) { cudaFree(p); }
};

struct PinnedMemoryPolicy {
  static constexpr const char* kWhat = "cudaMallocHost";
  static constexpr bool kCounted = false;
  static cudaError_t Alloc(void** p, size_t bytes) { return cudaMallocHost(p, bytes); }
  static void Free(void* p) { cudaFreeHost(p); }
};

template <typename T, typename Policy>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { Reset(); }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;
  CudaBuffer(CudaBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Frees what the buffer held, then allocates `count` elements
  // (uninitialized; nothing for count 0). `what` names the buffer in errors.
  CudaStatus Allocate(size_t count, const char* what = Policy::kWhat) {
    Reset();
    if (count == 0) return CudaStatus::Ok();
    void* p = nullptr;
    const cudaError_t e = Policy::Alloc(&p, count * sizeof(T));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state
      return CudaStatus::Internal(CudaErrorMessage(e, what) + " of " +
                                  std::to_string(count * sizeof(T)) + " bytes");
    }
    data_ = static_cast<T*>(p);
    size_ = count;
    if constexpr (Policy::kCounted) DeviceBytesInUse() += static_cast<int64_t>(bytes());
    return CudaStatus::Ok();
  }

  // Allocates only when the buffer holds fewer than `count` elements (the
  // old contents are lost). REQUIRES: no queued work uses the old memory.
  CudaStatus Reserve(size_t count, const char* what = Policy::kWhat) {
    if (count <= size_) return CudaStatus::Ok();
    return Allocate(count, what);
  }

  void Reset() {
    if (data_ != nullptr) {
      if constexpr (Policy::kCounted) DeviceBytesInUse() -= static_cast<int64_t>(bytes());
      Policy::Free(data_);
    }
    data_ = nullptr;
    size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  bool empty() const { return size_ == 0; }
  std::span<T> span() { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

template <typename T>
using DeviceBuffer = CudaBuffer<T, DeviceMemoryPolicy>;
template <typename T>
using PinnedBuffer = CudaBuffer<T, PinnedMemoryPolicy>;

// Owns a CUDA handle made by Traits::Create and destroyed by Traits::Destroy.
template <typename Traits>
class CudaHandle {
 public:
  using Handle = typename Traits::Handle;

  CudaHandle() = default;
  ~CudaHandle() {
    if (h_ != nullptr) Traits::Destroy(h_);
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  CudaStatus Create() {
    FOLIO_CUDA_RETURN_IF_ERROR(Traits::Create(&h_), Traits::kWhat);
    return CudaStatus::Ok();
  }
  Handle get() const { return h_; }

 private:
  Handle h_ = nullptr;
};

struct StreamTraits {
  using Handle = cudaStream_t;
  static constexpr const char* kWhat = "cudaStreamCreateWithFlags";
  static cudaError_t Create(cudaStream_t* s) {
    return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  }
  static void Destroy(cudaStream_t s) { cudaStreamDestroy(s); }
};

struct EventTraits {
  using Handle = cudaEvent_t;
  static constexpr const char* kWhat = "cudaEventCreateWithFlags";
  static cudaError_t Create(cudaEvent_t* e) {
    return cudaEventCreateWithFlags(e, cudaEventDisableTiming);
  }
  static void Destroy(cudaEvent_t e) { cudaEventDestroy(e); }
};

// Owns a cudaStream_t (non-blocking) or a cudaEvent_t (timing disabled).
using CudaStream = CudaHandle<StreamTraits>;
using CudaEvent = CudaHandle<EventTraits>;

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_DEVICE_BUFFER_H_
