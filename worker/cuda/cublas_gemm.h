// The linear layers of the CUDA model runner through cuBLAS:
//     Y[m][n] = X[m][k] * W[n][k]^T (+ bias[n])      (nn.Linear, row-major)
// X: fp32 activations; W: the weight in the compute dtype; Y: fp32.
//
//  - kFloat32: W fp32, cublasGemmEx with CUBLAS_COMPUTE_32F and the default
//    math mode (no TF32), so results stay close to the CPU reference
//    (OpenBLAS sgemm), up to summation order.
//  - kBFloat16: W bf16; X is cast to a bf16 scratch (round to nearest even)
//    by a small kernel, then cublasGemmEx with A/B bf16, C fp32,
//    CUBLAS_COMPUTE_32F (fp32 accumulation).
//
// cuBLAS is column-major: a row-major Y[m][n] is the column-major Y^T with
// leading dimension ldy, so the call computes Y^T = W * X^T as
// C[n][m] = op_T(W as col-major [k][n]) * X^T (col-major [k][m]).
//
// Thread-compatible: one handle and one scratch, bound to one stream.
#ifndef FOLIO_WORKER_CUDA_CUBLAS_GEMM_H_
#define FOLIO_WORKER_CUDA_CUBLAS_GEMM_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "worker/cuda/cuda_status.h"
#include "worker/cuda/device_buffer.h"

struct cublasContext;

namespace folio::gpu {

// Element type of the weights of the GEMMs (activations are always fp32).
enum class ComputeDtype : int32_t { kFloat32 = 0, kBFloat16 = 1 };

inline int64_t ComputeDtypeBytes(ComputeDtype t) { return t == ComputeDtype::kFloat32 ? 4 : 2; }
inline const char* ComputeDtypeName(ComputeDtype t) {
  return t == ComputeDtype::kFloat32 ? "float32" : "bfloat16";
}

class CublasGemm {
 public:
  // A handle whose work goes to `stream`. For kBFloat16, the activation
  // scratch is sized for `max_x_elems` (m * k) elements up front; larger
  // calls grow it (synchronizing the stream first).
  static CudaStatus Create(ComputeDtype dtype, cudaStream_t stream, int64_t max_x_elems,
                           std::unique_ptr<CublasGemm>* out);
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // Y = X W^T (+ bias). x: device fp32 [m][k]; w: device [n][k] in dtype()
  // (fp32 floats or bf16 bit patterns); bias: device fp32 [n] or null;
  // y: device fp32, rows ldy >= n floats apart (ldy 0 means n). m == 0 does
  // nothing. y must not overlap x or w.
  CudaStatus Linear(const float* x, int32_t m, int32_t k, const void* w, int32_t n,
                    const float* bias, float* y, int32_t ldy = 0);

  ComputeDtype dtype() const { return dtype_; }
  // Bytes of the bf16 activation scratch (0 for fp32).
  int64_t scratch_bytes() const { return static_cast<int64_t>(x_bf16_.bytes()); }

 private:
  CublasGemm(ComputeDtype dtype, cudaStream_t stream) : dtype_(dtype), stream_(stream) {}

  const ComputeDtype dtype_;
  const cudaStream_t stream_;
  cublasContext* handle_ = nullptr;
  DeviceBuffer<uint16_t> x_bf16_;
};

}  // namespace folio::gpu

#endif  // FOLIO_WORKER_CUDA_CUBLAS_GEMM_H_
