#include "worker/cuda/cublas_gemm.h"

#include <cublas_v2.h>

#include <string>

#include "worker/cuda/model_kernels.h"

namespace folio::gpu {
namespace {

CudaStatus FromCublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return CudaStatus::Ok();
  std::string message = std::string(what) + ": " + cublasGetStatusName(s) + " (" +
                        cublasGetStatusString(s) + ")";
  if (s == CUBLAS_STATUS_INVALID_VALUE) return CudaStatus::InvalidArgument(std::move(message));
  return CudaStatus::Internal(std::move(message));
}

}  // namespace

CudaStatus CublasGemm::Create(ComputeDtype dtype, cudaStream_t stream, int64_t max_x_elems,
                              std::unique_ptr<CublasGemm>* out) {
  std::unique_ptr<CublasGemm> g(new CublasGemm(dtype, stream));
  FOLIO_RETURN_IF_NOT_OK(FromCublas(cublasCreate(&g->handle_), "cublasCreate"));
  FOLIO_RETURN_IF_NOT_OK(FromCublas(cublasSetStream(g->handle_, stream), "cublasSetStream"));
  // Default math: no TF32 for fp32 GEMMs (CUBLAS_COMPUTE_32F is requested
  // explicitly below as well).
  FOLIO_RETURN_IF_NOT_OK(
      FromCublas(cublasSetMathMode(g->handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  if (dtype == ComputeDtype::kBFloat16 && max_x_elems > 0) {
    FOLIO_RETURN_IF_NOT_OK(g->x_bf16_.Allocate(size_t(max_x_elems), "bf16 GEMM scratch"));
  }
  *out = std::move(g);
  return CudaStatus::Ok();
}

CublasGemm::~CublasGemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

CudaStatus CublasGemm::Linear(const float* x, int32_t m, int32_t k, const void* w, int32_t n,
                              const float* bias, float* y, int32_t ldy) {
  if (ldy == 0) ldy = n;
  if (m < 0 || k <= 0 || n <= 0 || ldy < n) {
    return CudaStatus::InvalidArgument("Linear: bad sizes m=" + std::to_string(m) +
                                       " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                                       " ldy=" + std::to_string(ldy));
  }
  if (m == 0) return CudaStatus::Ok();
  const float alpha = 1.0f, beta = 0.0f;
  const void* b = x;
  cudaDataType_t ab_type = CUDA_R_32F;
  if (dtype_ == ComputeDtype::kBFloat16) {
    const size_t elems = size_t(m) * size_t(k);
    if (x_bf16_.size() < elems) {
      // The old scratch may still be read by queued GEMMs.
      FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      FOLIO_RETURN_IF_NOT_OK(x_bf16_.Allocate(elems, "bf16 GEMM scratch"));
    }
    FOLIO_CUDA_RETURN_IF_ERROR(
        CastFloatToBf16(x, int64_t(elems), x_bf16_.data(), stream_), "CastFloatToBf16");
    b = x_bf16_.data();
    ab_type = CUDA_R_16BF;
  }
  FOLIO_RETURN_IF_NOT_OK(FromCublas(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, ab_type, k, b, ab_type,
                   k, &beta, y, CUDA_R_32F, ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx"));
  if (bias != nullptr) {
    FOLIO_CUDA_RETURN_IF_ERROR(AddBias(y, bias, m, n, ldy, stream_), "AddBias");
  }
  return CudaStatus::Ok();
}

}  // namespace folio::gpu
