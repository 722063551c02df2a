// Outcome of a call of the CUDA model core (worker/cuda/): ok, or a message
// naming what failed. std-only on purpose: this directory also builds in
// FOLIO_KERNELS_ONLY mode without abseil; the full build's worker maps a
// failed CudaStatus to absl::InternalError (or InvalidArgument where the
// message says "invalid argument").
//
// Thread-safety: a value type.
#ifndef FOLIO_WORKER_CUDA_CUDA_STATUS_H_
#define FOLIO_WORKER_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

namespace folio::gpu {

class [[nodiscard]] CudaStatus {
 public:
  enum class Code { kOk, kInvalidArgument, kInternal };

  CudaStatus() = default;
  static CudaStatus Ok() { return CudaStatus(); }
  static CudaStatus InvalidArgument(std::string message) {
    return CudaStatus(Code::kInvalidArgument, std::move(message));
  }
  static CudaStatus Internal(std::string message) {
    return CudaStatus(Code::kInternal, std::move(message));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const {
    if (ok()) return "OK";
    return (code_ == Code::kInvalidArgument ? "INVALID_ARGUMENT: " : "INTERNAL: ") + message_;
  }

 private:
  CudaStatus(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// "what: cudaErrorX (description)" for a CUDA runtime error.
inline std::string CudaErrorMessage(cudaError_t e, const char* what) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Ok for cudaSuccess, else Internal (InvalidArgument for
// cudaErrorInvalidValue, which our kernels return when a host-side check
// failed and nothing was enqueued).
inline CudaStatus FromCuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return CudaStatus::Ok();
  if (e == cudaErrorInvalidValue) return CudaStatus::InvalidArgument(CudaErrorMessage(e, what));
  return CudaStatus::Internal(CudaErrorMessage(e, what));
}

}  // namespace folio::gpu

// Returns from the enclosing function (returning CudaStatus) on a CUDA error.
#define FOLIO_CUDA_RETURN_IF_ERROR(expr, what)                                \
  do {                                                                        \
    const cudaError_t folio_cuda_err_ = (expr);                               \
    if (folio_cuda_err_ != cudaSuccess) return ::folio::gpu::FromCuda(folio_cuda_err_, what); \
  } while (0)

// Returns a failed CudaStatus from the enclosing function.
#define FOLIO_RETURN_IF_NOT_OK(expr)              \
  do {                                            \
    ::folio::gpu::CudaStatus folio_st_ = (expr);  \
    if (!folio_st_.ok()) return folio_st_;        \
  } while (0)

#endif  // FOLIO_WORKER_CUDA_CUDA_STATUS_H_
