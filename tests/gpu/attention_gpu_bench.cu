// Decode bandwidth of the CUDA paged attention against the device's own
// copy bandwidth (built as attention_bandwidth_gpu_check so that
// tests/gpu/run.sh runs it; the figures are for docs/performance.md, not a
// gate). Measures, in one run:
//   (a) device-to-device cudaMemcpyAsync of a 1 GiB buffer (bytes read +
//       written = 2 GiB per copy);
//   (b) gpu::PagedAttentionDecode at batch 64, context 1024 and 4096, heads
//       32/32 (MHA) and 32/8 (GQA), head_dim 128, bf16, block_size 16,
//       shuffled block ids; bandwidth = K and V bytes read per call / time.
// cudaEvent timing, warm-up, median of 20 iterations. Prints a table: case,
// us, GB/s, % of copy bandwidth.
// Exit: 0 (whatever the figures), 1 on a CUDA error, 77 without a device.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/attention.cuh"

namespace folio::kernels {
namespace {

#define BENCH_CHECK(expr)                                                               \
  do {                                                                                  \
    cudaError_t err_ = (expr);                                                          \
    if (err_ != cudaSuccess) {                                                          \
      std::printf("CUDA error: %s -> %s\n", #expr, cudaGetErrorString(err_));           \
      return false;                                                                     \
    }                                                                                   \
  } while (0)

constexpr int kWarmup = 3;
constexpr int kIters = 20;

// Small deterministic values in every element (no NaN/Inf from garbage).
__global__ void FillBf16(__nv_bfloat16* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t h = (static_cast<uint32_t>(i) ^ salt) * 2654435761u;
    p[i] = __float2bfloat16_rn(static_cast<float>(h >> 8) * 0x1p-24f - 0.5f);
  }
}
__global__ void FillF32(float* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t h = (static_cast<uint32_t>(i) ^ salt) * 2654435761u;
    p[i] = static_cast<float>(h >> 8) * 0x1p-24f - 0.5f;
  }
}

// Median time in microseconds of `iters` runs of fn (after warm-up).
template <typename Fn>
bool TimeMedian(Fn fn, cudaStream_t stream, double* us) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup; ++i) BENCH_CHECK(fn());
  std::vector<double> times;
  for (int i = 0; i < kIters; ++i) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    BENCH_CHECK(fn());
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms * 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  *us = times[times.size() / 2];
  return true;
}

bool CopyBandwidth(cudaStream_t stream, double* gbps) {
  constexpr size_t kBytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  BENCH_CHECK(cudaMalloc(&src, kBytes));
  BENCH_CHECK(cudaMalloc(&dst, kBytes));
  BENCH_CHECK(cudaMemsetAsync(src, 1, kBytes, stream));
  double us = 0;
  const bool ok = TimeMedian(
      [&] { return cudaMemcpyAsync(dst, src, kBytes, cudaMemcpyDeviceToDevice, stream); }, stream,
      &us);
  cudaFree(src);
  cudaFree(dst);
  if (!ok) return false;
  *gbps = 2.0 * kBytes / (us * 1e-6) / 1e9;
  std::printf("%-34s %10.1f %9.1f %8s\n", "memcpy D2D 1 GiB (r+w 2 GiB)", us, *gbps, "100.0%");
  return true;
}

struct DecodeCase {
  int32_t num_seqs, context, num_heads, num_kv_heads;
};

bool DecodeBandwidth(const DecodeCase& dc, double copy_gbps, cudaStream_t stream) {
  constexpr int32_t kHeadDim = 128;
  constexpr int32_t kBlockSize = 16;
  const int32_t blocks_per_seq = (dc.context + kBlockSize - 1) / kBlockSize;
  const int32_t num_blocks = dc.num_seqs * blocks_per_seq;
  const size_t elems = size_t{static_cast<uint32_t>(num_blocks)} * dc.num_kv_heads * kBlockSize *
                       kHeadDim;
  __nv_bfloat16 *k = nullptr, *v = nullptr;
  float *q = nullptr, *out = nullptr;
  int32_t *tables = nullptr, *lens = nullptr;
  void* ws = nullptr;
  BENCH_CHECK(cudaMalloc(&k, elems * sizeof(__nv_bfloat16)));
  BENCH_CHECK(cudaMalloc(&v, elems * sizeof(__nv_bfloat16)));
  const size_t q_elems = size_t{static_cast<uint32_t>(dc.num_seqs)} * dc.num_heads * kHeadDim;
  BENCH_CHECK(cudaMalloc(&q, q_elems * sizeof(float)));
  BENCH_CHECK(cudaMalloc(&out, q_elems * sizeof(float)));
  FillBf16<<<1024, 256, 0, stream>>>(k, elems, 1);
  FillBf16<<<1024, 256, 0, stream>>>(v, elems, 2);
  FillF32<<<256, 256, 0, stream>>>(q, q_elems, 3);
  BENCH_CHECK(cudaGetLastError());

  // Every block used once, in shuffled order across all sequences.
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(7);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<int32_t> host_lens(dc.num_seqs, dc.context);
  BENCH_CHECK(cudaMalloc(&tables, ids.size() * sizeof(int32_t)));
  BENCH_CHECK(cudaMalloc(&lens, host_lens.size() * sizeof(int32_t)));
  BENCH_CHECK(cudaMemcpy(tables, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(lens, host_lens.data(), host_lens.size() * sizeof(int32_t),
                         cudaMemcpyHostToDevice));

  const gpu::GpuPagedKvLayer kv{k, v, CacheDtype::kBFloat16, num_blocks, dc.num_kv_heads,
                                kBlockSize, kHeadDim};
  const BlockTables bt{tables, dc.num_seqs, blocks_per_seq};
  const size_t ws_bytes = gpu::PagedAttentionDecodeWorkspaceBytes(
      dc.num_seqs, dc.num_heads, kHeadDim, dc.context, 0);
  if (ws_bytes > 0) BENCH_CHECK(cudaMalloc(&ws, ws_bytes));
  int device = 0, sms = 0;
  BENCH_CHECK(cudaGetDevice(&device));
  BENCH_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int32_t slice = gpu::ChooseDecodePartition(dc.num_seqs, dc.num_heads, dc.num_kv_heads,
                                                   dc.context, 0, sms);
  const float scale = 0.08838834764f;  // 1/sqrt(128)
  double us = 0;
  const bool ok = TimeMedian(
      [&] {
        return gpu::PagedAttentionDecode(q, kv, bt, lens, dc.context, dc.num_heads, scale, ws,
                                         ws_bytes, out, stream, 0);
      },
      stream, &us);
  cudaFree(k);
  cudaFree(v);
  cudaFree(q);
  cudaFree(out);
  cudaFree(tables);
  cudaFree(lens);
  if (ws != nullptr) cudaFree(ws);
  if (!ok) return false;
  const double bytes = 2.0 * dc.num_seqs * static_cast<double>(dc.context) * dc.num_kv_heads * kHeadDim *
                       sizeof(__nv_bfloat16);
  const double gbps = bytes / (us * 1e-6) / 1e9;
  char name[64];
  std::snprintf(name, sizeof(name), "decode b%d ctx%d %d/%d slice=%d", dc.num_seqs, dc.context,
                dc.num_heads, dc.num_kv_heads, slice);
  std::printf("%-34s %10.1f %9.1f %7.1f%%\n", name, us, gbps, 100.0 * gbps / copy_gbps);
  return true;
}

int Main() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    std::printf("device 0: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
  }
  std::printf("paged decode: head_dim 128, bf16, block_size 16, shuffled blocks; "
              "median of %d after %d warm-up\n",
              kIters, kWarmup);
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) return 1;
  std::printf("%-34s %10s %9s %8s\n", "case", "us", "GB/s", "% copy");
  double copy_gbps = 0;
  bool ok = CopyBandwidth(stream, &copy_gbps);
  const DecodeCase cases[] = {
      {64, 1024, 32, 32}, {64, 1024, 32, 8}, {64, 4096, 32, 32}, {64, 4096, 32, 8}};
  for (const DecodeCase& dc : cases) ok = ok && DecodeBandwidth(dc, copy_gbps, stream);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace folio::kernels

int main() { return folio::kernels::Main(); }
