// GPU check: the CUDA elementwise layer ops (RMSNorm, fused add + RMSNorm,
// RoPE, SiLU-and-mul; kernels/cuda/{norm,rope,activation}.cuh) against their
// CPU twins on random shapes, vector and scalar paths, with error bounds
// (ggml test-backend-ops style). Standalone: CUDA runtime + std + kernels libs.
// Exit: 0 all passed, 1 any failure, 77 no CUDA device (ctest: skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope.cuh"
#include "tests/gpu/gpu_check_util.h"

namespace folio::kernels {
namespace {

using gpu_check::DeviceArray;
using gpu_check::RandomNormal;
using gpu_check::ReportMaxErr;

// max |got - want| / (1 + |want|).
double MaxRelErr(const std::vector<float>& got, const std::vector<float>& want) {
  double e = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(want[i])) / (1.0 + std::fabs(double(want[i])));
    if (std::isnan(d)) return INFINITY;
    e = std::max(e, d);
  }
  return e;
}

constexpr double kTol = 2e-5;

void CheckRmsNorm(int32_t n, int32_t dim, bool in_place, size_t misalign, std::mt19937& rng) {
  const std::string name = "rms_norm n=" + std::to_string(n) + " dim=" + std::to_string(dim) +
                           (in_place ? " in_place" : "") + (misalign ? " misaligned" : "");
  const std::vector<float> x = RandomNormal(size_t(n) * dim, 0.0f, 2.0f, rng);
  const std::vector<float> w = RandomNormal(dim, 1.0f, 0.2f, rng);
  std::vector<float> want(x.size());
  cpu::RmsNorm(x.data(), w.data(), n, dim, 1e-6f, want.data());
  DeviceArray<float> dx, dw, dout;
  CHECK_CUDA(dx.Alloc(x.size(), misalign));
  CHECK_CUDA(dw.Alloc(w.size()));
  CHECK_CUDA(dout.Alloc(x.size()));
  CHECK_CUDA(dx.Upload(x));
  CHECK_CUDA(dw.Upload(w));
  float* out = in_place ? dx.data() : dout.data();
  CHECK_CUDA(gpu::RmsNorm(dx.data(), dw.data(), n, dim, 1e-6f, out, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got;
  CHECK_CUDA((in_place ? dx : dout).Download(&got));
  const double err = MaxRelErr(got, want);
  ReportMaxErr(name, err <= kTol, err);
}

void CheckFusedAddRmsNorm(int32_t n, int32_t dim, size_t misalign, std::mt19937& rng) {
  const std::string name = "fused_add_rms_norm n=" + std::to_string(n) +
                           " dim=" + std::to_string(dim) + (misalign ? " misaligned" : "");
  std::vector<float> x = RandomNormal(size_t(n) * dim, 0.0f, 1.0f, rng);
  std::vector<float> res = RandomNormal(x.size(), 0.0f, 3.0f, rng);
  const std::vector<float> w = RandomNormal(dim, 1.0f, 0.2f, rng);
  DeviceArray<float> dx, dr, dw;
  CHECK_CUDA(dx.Alloc(x.size(), misalign));
  CHECK_CUDA(dr.Alloc(x.size()));
  CHECK_CUDA(dw.Alloc(w.size()));
  CHECK_CUDA(dx.Upload(x));
  CHECK_CUDA(dr.Upload(res));
  CHECK_CUDA(dw.Upload(w));
  cpu::FusedAddRmsNorm(x.data(), res.data(), w.data(), n, dim, 1e-5f);
  CHECK_CUDA(gpu::FusedAddRmsNorm(dx.data(), dr.data(), dw.data(), n, dim, 1e-5f, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> gx, gr;
  CHECK_CUDA(dx.Download(&gx));
  CHECK_CUDA(dr.Download(&gr));
  const double ex = MaxRelErr(gx, x), er = MaxRelErr(gr, res);
  ReportMaxErr(name, ex <= kTol && er <= kTol, std::max(ex, er),
               "x_err=" + std::to_string(ex) + " residual_err=" + std::to_string(er));
}

void CheckRope(int32_t head_dim, float theta, std::optional<cpu::RopeScalingParams> scaling,
               int32_t num_heads, int32_t num_kv_heads, int32_t num_tokens, bool with_q,
               std::mt19937& rng) {
  const int32_t max_position = 4096;
  const std::string name = "rope head_dim=" + std::to_string(head_dim) + " theta=" +
                           std::to_string(int(theta)) + (scaling ? " llama3" : "") +
                           " heads=" + std::to_string(num_heads) + "/" +
                           std::to_string(num_kv_heads) + " tokens=" +
                           std::to_string(num_tokens) + (with_q ? "" : " k_only");
  const cpu::RotaryEmbedding rope(head_dim, theta, scaling, max_position);
  std::uniform_int_distribution<int32_t> pos_dist(0, max_position - 1);
  std::vector<int32_t> positions(num_tokens);
  for (int32_t& p : positions) p = pos_dist(rng);
  // Out-of-range positions are skipped by the GPU (left as they are).
  const int32_t bad[] = {-1, max_position, max_position + 77, INT_MIN, INT_MAX};
  for (int32_t t = 0, b = 0; t < num_tokens; t += 5, ++b) positions[t] = bad[b % 5];
  if (num_tokens > 1) positions[1] = max_position - 1;

  std::vector<float> q =
      RandomNormal(size_t(num_tokens) * num_heads * head_dim, 0.0f, 1.0f, rng);
  std::vector<float> k =
      RandomNormal(size_t(num_tokens) * num_kv_heads * head_dim, 0.0f, 1.0f, rng);
  DeviceArray<float> dtable, dq, dk;
  DeviceArray<int32_t> dpos;
  CHECK_CUDA(dtable.Alloc(size_t(max_position) * head_dim));
  CHECK_CUDA(cudaMemcpy(dtable.data(), rope.Cos(0), dtable.bytes(),
                        cudaMemcpyHostToDevice));
  CHECK_CUDA(dpos.Alloc(positions.size()));
  CHECK_CUDA(dpos.Upload(positions));
  CHECK_CUDA(dq.Alloc(q.size()));
  CHECK_CUDA(dk.Alloc(k.size()));
  CHECK_CUDA(dq.Upload(q));
  CHECK_CUDA(dk.Upload(k));
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (positions[t] < 0 || positions[t] >= max_position) continue;
    rope.Apply(&positions[t], 1, with_q ? q.data() + size_t(t) * num_heads * head_dim : nullptr,
               num_heads, k.data() + size_t(t) * num_kv_heads * head_dim, num_kv_heads);
  }
  CHECK_CUDA(gpu::ApplyRope(dtable.data(), max_position, head_dim, dpos.data(), num_tokens,
                            with_q ? dq.data() : nullptr, num_heads, dk.data(), num_kv_heads,
                            nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> gq, gk;
  CHECK_CUDA(dq.Download(&gq));
  CHECK_CUDA(dk.Download(&gk));
  const double eq = MaxRelErr(gq, q), ek = MaxRelErr(gk, k);
  ReportMaxErr(name, eq <= kTol && ek <= kTol, std::max(eq, ek));
}

void CheckSiluAndMul(int32_t n, int32_t d, size_t misalign, std::mt19937& rng) {
  const std::string name = "silu_and_mul n=" + std::to_string(n) + " d=" + std::to_string(d) +
                           (misalign ? " misaligned" : "");
  std::vector<float> gu = RandomNormal(size_t(n) * 2 * d, 0.0f, 3.0f, rng);
  if (!gu.empty()) {
    gu[0] = -100.0f;  // exp overflow territory: silu -> -0
    gu[gu.size() / 2] = 95.0f;
  }
  std::vector<float> want(size_t(n) * d);
  cpu::SiluAndMul(gu.data(), n, d, want.data());
  DeviceArray<float> din, dout;
  CHECK_CUDA(din.Alloc(gu.size(), misalign));
  CHECK_CUDA(dout.Alloc(want.size()));
  CHECK_CUDA(din.Upload(gu));
  CHECK_CUDA(gpu::SiluAndMul(din.data(), n, d, dout.data(), nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got;
  CHECK_CUDA(dout.Download(&got));
  const double err = MaxRelErr(got, want);
  ReportMaxErr(name, err <= kTol, err);
}

void CheckInvalidArgs() {
  const std::string name = "invalid_args";
  float* p = reinterpret_cast<float*>(uintptr_t{256});  // never dereferenced
  const int32_t* pos = reinterpret_cast<const int32_t*>(uintptr_t{256});
  const bool ok =
      gpu::RmsNorm(p, p, -1, 8, 1e-6f, p, nullptr) == cudaErrorInvalidValue &&
      gpu::RmsNorm(p, p, 2, 0, 1e-6f, p, nullptr) == cudaErrorInvalidValue &&
      gpu::RmsNorm(nullptr, p, 2, 8, 1e-6f, p, nullptr) == cudaErrorInvalidValue &&
      gpu::RmsNorm(p, p, 2, 8, -1.0f, p, nullptr) == cudaErrorInvalidValue &&
      gpu::RmsNorm(p, p, 0, 8, 1e-6f, p, nullptr) == cudaSuccess &&
      gpu::FusedAddRmsNorm(p, p, p, 2, 8, 1e-6f, nullptr) == cudaErrorInvalidValue &&
      gpu::FusedAddRmsNorm(p, nullptr, p, 2, 8, 1e-6f, nullptr) == cudaErrorInvalidValue &&
      gpu::ApplyRope(p, 16, 7, pos, 1, p, 1, nullptr, 0, nullptr) == cudaErrorInvalidValue &&
      gpu::ApplyRope(nullptr, 16, 8, pos, 1, p, 1, nullptr, 0, nullptr) == cudaErrorInvalidValue &&
      gpu::ApplyRope(p, 0, 8, pos, 1, p, 1, nullptr, 0, nullptr) == cudaErrorInvalidValue &&
      gpu::ApplyRope(p, 16, 8, nullptr, 1, p, 1, nullptr, 0, nullptr) == cudaErrorInvalidValue &&
      gpu::ApplyRope(p, 16, 8, pos, 0, p, 1, nullptr, 0, nullptr) == cudaSuccess &&
      gpu::SiluAndMul(p, 2, 0, p + 64, nullptr) == cudaErrorInvalidValue &&
      gpu::SiluAndMul(nullptr, 2, 4, p, nullptr) == cudaErrorInvalidValue &&
      gpu::SiluAndMul(p, 2, 4, p + 4, nullptr) == cudaErrorInvalidValue;  // overlap
  ReportMaxErr(name, ok, 0);
}

int Run() {
  if (gpu_check::DeviceCountOrSkip() == 0) return gpu_check::kExitSkip;
  gpu_check::PrintDevice(0);
  std::mt19937 rng(20240602);
  CheckInvalidArgs();

  for (int32_t dim : {64, 896, 4096, 5120, 8192, 4097, 13}) {
    CheckRmsNorm(7, dim, /*in_place=*/false, 0, rng);
    CheckRmsNorm(3, dim, /*in_place=*/true, 0, rng);
    CheckFusedAddRmsNorm(5, dim, 0, rng);
  }
  CheckRmsNorm(4, 4096, false, /*misalign=*/1, rng);
  CheckRmsNorm(4, 4096, true, /*misalign=*/1, rng);
  CheckRmsNorm(1, 1, false, 0, rng);
  CheckFusedAddRmsNorm(4, 4096, /*misalign=*/1, rng);
  CheckFusedAddRmsNorm(300, 2048, 0, rng);

  const cpu::RopeScalingParams llama3{8.0f, 1.0f, 4.0f, 8192};
  for (int32_t head_dim : {64, 128, 256}) {
    CheckRope(head_dim, 10000.0f, std::nullopt, 8, 2, 37, true, rng);
    CheckRope(head_dim, 500000.0f, llama3, 32, 8, 19, true, rng);
    CheckRope(head_dim, 1000000.0f, std::nullopt, 4, 4, 11, /*with_q=*/false, rng);
  }
  CheckRope(80, 10000.0f, std::nullopt, 3, 1, 9, true, rng);
  CheckRope(128, 500000.0f, llama3, 64, 8, 1, true, rng);
  cpu::RopeScalingParams yarn;  // Qwen2.5's 128k recipe: the table carries the attention factor
  yarn.type = cpu::RopeScalingType::kYarn;
  yarn.factor = 4.0f;
  yarn.original_max_position_embeddings = 32768;
  yarn.attention_factor = 1.1386294f;
  CheckRope(128, 1000000.0f, yarn, 28, 4, 23, true, rng);

  for (int32_t d : {11008, 14336, 4, 13, 1}) CheckSiluAndMul(9, d, 0, rng);
  CheckSiluAndMul(1, 8192, /*misalign=*/1, rng);
  CheckSiluAndMul(600, 512, 0, rng);

  return gpu_check::Summary("layer_ops_gpu_check");
}

}  // namespace
}  // namespace folio::kernels

int main() { return folio::kernels::Run(); }
