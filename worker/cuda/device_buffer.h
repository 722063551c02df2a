// RAII owners of CUDA memory: DeviceBuffer<T> (cudaMalloc/cudaFree) and
// PinnedBuffer<T> (cudaMallocHost/cudaFreeHost), move-only, with typed
// element counts. Allocation returns a CudaStatus instead of throwing; the
// bytes a buffer holds are counted in a process-wide tally so that memory
// profiling can tell our own allocations from the rest (CUDA context,
// cuBLAS workspaces, other processes).
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

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // Frees what the buffer held, then allocates `count` elements
  // (uninitialized; nothing for count 0). `what` names the buffer in errors.
  CudaStatus Allocate(size_t count, const char* what = "cudaMalloc") {
    Reset();
    if (count == 0) return CudaStatus::Ok();
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, count * sizeof(T));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free error state
      return CudaStatus::Internal(CudaErrorMessage(e, what) + " of " +
                                  std::to_string(count * sizeof(T)) + " bytes");
    }
    data_ = static_cast<T*>(p);
    size_ = count;
    DeviceBytesInUse() += static_cast<int64_t>(bytes());
    return CudaStatus::Ok();
  }

  // Allocates only when the buffer holds fewer than `count` elements (the
  // old contents are lost). REQUIRES: no queued work uses the old memory.
  CudaStatus Reserve(size_t count, const char* what = "cudaMalloc") {
    if (count <= size_) return CudaStatus::Ok();
    return Allocate(count, what);
  }

  void Reset() {
    if (data_ != nullptr) {
      DeviceBytesInUse() -= static_cast<int64_t>(bytes());
      cudaFree(data_);
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
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { Reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  CudaStatus Allocate(size_t count, const char* what = "cudaMallocHost") {
    Reset();
    if (count == 0) return CudaStatus::Ok();
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, count * sizeof(T));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return CudaStatus::Internal(CudaErrorMessage(e, what) + " of " +
                                  std::to_string(count * sizeof(T)) + " bytes");
    }
    data_ = static_cast<T*>(p);
    size_ = count;
    return CudaStatus::Ok();
  }

  CudaStatus Reserve(size_t count, const char* what = "cudaMallocHost") {
    if (count <= size_) return CudaStatus::Ok();
    return Allocate(count, what);
  }

  void Reset() {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  std::span<T> span() { return {data_, size_}; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Owns a cudaStream_t (non-blocking) or a cudaEvent_t (timing disabled).
class CudaStream {
 public:
  CudaStream() = default;
  ~CudaStream() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStatus Create() {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking),
                               "cudaStreamCreateWithFlags");
    return CudaStatus::Ok();
  }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent() {
    if (e_ != nullptr) cudaEventDestroy(e_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaStatus Create() {
    FOLIO_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming),
                               "cudaEventCreateWithFlags");
    return CudaStatus::Ok();
  }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_DEVICE_BUFFER_H_
