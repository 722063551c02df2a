// Decode bandwidth of the CUDA paged attention against the device's own
// copy bandwidth (built as attention_bandwidth_gpu_check so that
// tests/gpu/run.sh runs it; the figures are for docs/performance.md, not a
// gate). Measures, in one run:
//   (a) device-to-device cudaMemcpyAsync of a 1 GiB buffer (bytes read +
//       written = 2 GiB per copy);
//   (b) gpu::PagedAttentionDecode at batch 64, context 1024 and 4096, heads
//       32/32 (MHA) and 32/8 (GQA), head_dim 128, bf16, block_size 16,
//       shuffled block ids; bandwidth = K and V bytes read per call / time;
//       each on the CUDA-core and the tensor-core kernel and the automatic
//       choice.
// cudaEvent timing with the call queued behind a spin kernel (launch latency
// not counted), warm-up, median of 20 iterations. Prints a table: case, us,
// GB/s, % of copy bandwidth.
// Exit: 0 (whatever the figures), 1 on a CUDA error, 77 without a device.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cuda/attention.cuh"
#include "tests/gpu/gpu_check_util.h"

namespace folio::kernels {
namespace {

using gpu_check::DeviceArray;

constexpr int kWarmup = 3;
constexpr int kIters = 20;

// Small deterministic values in every element (no NaN/Inf from garbage).
template <typename T>
__global__ void Fill(T* p, size_t n, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t h = (static_cast<uint32_t>(i) ^ salt) * 2654435761u;
    const float x = static_cast<float>(h >> 8) * 0x1p-24f - 0.5f;
    if constexpr (std::is_same_v<T, float>) {
      p[i] = x;
    } else {
      p[i] = __float2bfloat16_rn(x);
    }
  }
}

// Keeps the GPU busy for ~`ns` nanoseconds, so that the work queued behind it
// is already waiting when it ends.
__global__ void Spin(long long ns) {
  long long t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// Median time in microseconds of `iters` runs of fn (after warm-up). Each
// timed run is queued behind a 200 us spin kernel: the start event fires
// when fn's work is already queued, so the host's launch latency (large
// under some container runtimes) is not counted; a serving loop queues its
// launches ahead of the GPU the same way.
// queued = false times the call on an idle GPU instead (launch included).
template <typename Fn>
bool TimeMedian(Fn fn, cudaStream_t stream, bool queued, double* us) {
  cudaEvent_t start, stop;
  CHECK_CUDA_OR_FALSE(cudaEventCreate(&start));
  CHECK_CUDA_OR_FALSE(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup; ++i) CHECK_CUDA_OR_FALSE(fn());
  std::vector<double> times;
  for (int i = 0; i < kIters; ++i) {
    if (queued) {
      Spin<<<1, 1, 0, stream>>>(200000);
      CHECK_CUDA_OR_FALSE(cudaGetLastError());
    }
    CHECK_CUDA_OR_FALSE(cudaEventRecord(start, stream));
    CHECK_CUDA_OR_FALSE(fn());
    CHECK_CUDA_OR_FALSE(cudaEventRecord(stop, stream));
    CHECK_CUDA_OR_FALSE(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK_CUDA_OR_FALSE(cudaEventElapsedTime(&ms, start, stop));
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
  DeviceArray<uint8_t> src, dst;
  CHECK_CUDA_OR_FALSE(src.Alloc(kBytes));
  CHECK_CUDA_OR_FALSE(dst.Alloc(kBytes));
  CHECK_CUDA_OR_FALSE(cudaMemsetAsync(src.data(), 1, kBytes, stream));
  double us = 0, idle_us = 0;
  auto copy = [&] {
    return cudaMemcpyAsync(dst.data(), src.data(), kBytes, cudaMemcpyDeviceToDevice, stream);
  };
  if (!TimeMedian(copy, stream, true, &us) || !TimeMedian(copy, stream, false, &idle_us)) {
    return false;
  }
  *gbps = 2.0 * kBytes / (us * 1e-6) / 1e9;
  std::printf("%-40s %10.1f %9.1f %8s %10.1f %8.1f%%\n", "memcpy D2D 1 GiB (r+w 2 GiB)", us,
              *gbps, "100.0%", idle_us, 100.0 * us / idle_us);
  return true;
}

struct DecodeCase {
  int32_t num_seqs, context, num_heads, num_kv_heads;
};

bool DecodeBandwidth(const DecodeCase& dc, gpu::GpuDecodeKernel kernel, double copy_gbps,
                     cudaStream_t stream) {
  constexpr int32_t kHeadDim = 128;
  constexpr int32_t kBlockSize = 16;
  const int32_t blocks_per_seq = (dc.context + kBlockSize - 1) / kBlockSize;
  const int32_t num_blocks = dc.num_seqs * blocks_per_seq;
  const size_t elems = size_t{static_cast<uint32_t>(num_blocks)} * dc.num_kv_heads * kBlockSize *
                       kHeadDim;
  DeviceArray<__nv_bfloat16> k, v;
  DeviceArray<float> q, out;
  DeviceArray<int32_t> tables, lens;
  DeviceArray<uint8_t> ws;
  CHECK_CUDA_OR_FALSE(k.Alloc(elems));
  CHECK_CUDA_OR_FALSE(v.Alloc(elems));
  const size_t q_elems = size_t{static_cast<uint32_t>(dc.num_seqs)} * dc.num_heads * kHeadDim;
  CHECK_CUDA_OR_FALSE(q.Alloc(q_elems));
  CHECK_CUDA_OR_FALSE(out.Alloc(q_elems));
  Fill<<<1024, 256, 0, stream>>>(k.data(), elems, 1);
  Fill<<<1024, 256, 0, stream>>>(v.data(), elems, 2);
  Fill<<<256, 256, 0, stream>>>(q.data(), q_elems, 3);
  CHECK_CUDA_OR_FALSE(cudaGetLastError());

  // Every block used once, in shuffled order across all sequences.
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(7);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<int32_t> host_lens(dc.num_seqs, dc.context);
  CHECK_CUDA_OR_FALSE(tables.AllocAndUpload(ids));
  CHECK_CUDA_OR_FALSE(lens.AllocAndUpload(host_lens));

  const gpu::GpuPagedKvLayer kv{k.data(), v.data(), CacheDtype::kBFloat16, num_blocks,
                                dc.num_kv_heads, kBlockSize, kHeadDim};
  const BlockTables bt{tables.data(), dc.num_seqs, blocks_per_seq};
  const size_t ws_bytes = gpu::PagedAttentionDecodeWorkspaceBytes(
      dc.num_seqs, dc.num_heads, kHeadDim, dc.context, 0);
  if (ws_bytes > 0) CHECK_CUDA_OR_FALSE(ws.Alloc(ws_bytes));
  int device = 0, sms = 0;
  CHECK_CUDA_OR_FALSE(cudaGetDevice(&device));
  CHECK_CUDA_OR_FALSE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int32_t slice =
      gpu::ChooseDecodePartition(dc.num_seqs, dc.num_heads, dc.num_kv_heads, dc.context, 0, sms,
                                 CacheDtype::kBFloat16, kernel);
  const float scale = 0.08838834764f;  // 1/sqrt(128)
  // A copy with the same traffic (reads + writes = the K/V bytes the decode
  // reads): a reference with the same duration, so the same fixed ramp and
  // tail costs, as the 1 GiB copy's are amortized over 0.5 ms.
  const double bytes = 2.0 * dc.num_seqs * static_cast<double>(dc.context) * dc.num_kv_heads *
                       kHeadDim * sizeof(__nv_bfloat16);
  DeviceArray<uint8_t> copy_src, copy_dst;
  const size_t copy_bytes = static_cast<size_t>(bytes / 2);
  CHECK_CUDA_OR_FALSE(copy_src.Alloc(copy_bytes));
  CHECK_CUDA_OR_FALSE(copy_dst.Alloc(copy_bytes));
  CHECK_CUDA_OR_FALSE(cudaMemsetAsync(copy_src.data(), 1, copy_bytes, stream));
  double same_copy_us = 0;
  if (!TimeMedian(
          [&] {
            return cudaMemcpyAsync(copy_dst.data(), copy_src.data(), copy_bytes,
                                   cudaMemcpyDeviceToDevice, stream);
          },
          stream, true, &same_copy_us)) {
    return false;
  }

  double us = 0, idle_us = 0;
  auto decode = [&] {
    return gpu::PagedAttentionDecode(q.data(), kv, bt, lens.data(), dc.context, dc.num_heads,
                                     scale, ws_bytes > 0 ? ws.data() : nullptr, ws_bytes,
                                     out.data(), stream, 0, kernel);
  };
  if (!TimeMedian(decode, stream, true, &us) || !TimeMedian(decode, stream, false, &idle_us)) {
    return false;
  }
  const double gbps = bytes / (us * 1e-6) / 1e9;
  const char* kernel_name =
      kernel == gpu::GpuDecodeKernel::kSimt                        ? "simt"
      : kernel == gpu::GpuDecodeKernel::kTensorCores               ? "mma"
      : kernel == gpu::GpuDecodeKernel::kTensorCoresPersistent    ? "mma-persist"
                                                                   : "auto";
  char name[64];
  std::snprintf(name, sizeof(name), "decode b%d ctx%d %d/%d slice=%d %s", dc.num_seqs,
                dc.context, dc.num_heads, dc.num_kv_heads, slice, kernel_name);
  std::printf("%-40s %10.1f %9.1f %7.1f%% %10.1f %8.1f%% %10.1f%%\n", name, us, gbps,
              100.0 * gbps / copy_gbps, idle_us,
              100.0 * bytes / (idle_us * 1e-6) / 1e9 / copy_gbps, 100.0 * same_copy_us / us);
  return true;
}

// Prefill over the paged cache: num_seqs chunks of `query` tokens at the end
// of contexts of `context` positions (query == context: whole prompts),
// head_dim 128, bf16, block size 16, shuffled blocks. Prints µs and the
// tensor-core rate: 4 * head_dim FLOPs per (query row, visible position).
struct PrefillCase {
  int32_t num_seqs, context, query, num_heads, num_kv_heads;
};

bool PrefillThroughput(const PrefillCase& pc, cudaStream_t stream) {
  constexpr int32_t kHeadDim = 128;
  constexpr int32_t kBlockSize = 16;
  const int32_t blocks_per_seq = (pc.context + kBlockSize - 1) / kBlockSize;
  const int32_t num_blocks = pc.num_seqs * blocks_per_seq;
  const size_t elems = size_t{static_cast<uint32_t>(num_blocks)} * pc.num_kv_heads * kBlockSize *
                       kHeadDim;
  const int32_t tokens = pc.num_seqs * pc.query;
  const size_t q_elems = size_t{static_cast<uint32_t>(tokens)} * pc.num_heads * kHeadDim;
  DeviceArray<__nv_bfloat16> k, v;
  DeviceArray<float> q, out;
  DeviceArray<int32_t> tables, lens, starts;
  CHECK_CUDA_OR_FALSE(k.Alloc(elems));
  CHECK_CUDA_OR_FALSE(v.Alloc(elems));
  CHECK_CUDA_OR_FALSE(q.Alloc(q_elems));
  CHECK_CUDA_OR_FALSE(out.Alloc(q_elems));
  Fill<<<1024, 256, 0, stream>>>(k.data(), elems, 4);
  Fill<<<1024, 256, 0, stream>>>(v.data(), elems, 5);
  Fill<<<256, 256, 0, stream>>>(q.data(), q_elems, 6);
  CHECK_CUDA_OR_FALSE(cudaGetLastError());
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(8);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> host_starts(pc.num_seqs + 1);
  for (int32_t i = 0; i <= pc.num_seqs; ++i) host_starts[i] = i * pc.query;
  CHECK_CUDA_OR_FALSE(tables.AllocAndUpload(ids));
  CHECK_CUDA_OR_FALSE(lens.AllocAndUpload(std::vector<int32_t>(pc.num_seqs, pc.context)));
  CHECK_CUDA_OR_FALSE(starts.AllocAndUpload(host_starts));
  const gpu::GpuPagedKvLayer kv{k.data(), v.data(), CacheDtype::kBFloat16, num_blocks,
                                pc.num_kv_heads, kBlockSize, kHeadDim};
  const BlockTables bt{tables.data(), pc.num_seqs, blocks_per_seq};
  double us = 0;
  if (!TimeMedian(
          [&] {
            return gpu::PagedAttentionPrefill(q.data(), kv, bt, starts.data(), lens.data(),
                                              pc.num_seqs, pc.query, pc.num_heads,
                                              0.08838834764f, out.data(), stream);
          },
          stream, true, &us)) {
    return false;
  }
  // Query i (of query) sees context - query + i + 1 positions.
  const double visible = static_cast<double>(pc.query) * (pc.context - pc.query) +
                         static_cast<double>(pc.query) * (pc.query + 1) / 2.0;
  const double flops = 4.0 * kHeadDim * pc.num_heads * pc.num_seqs * visible;
  char name[64];
  std::snprintf(name, sizeof(name), "prefill b%d ctx%d q%d %d/%d", pc.num_seqs, pc.context,
                pc.query, pc.num_heads, pc.num_kv_heads);
  std::printf("%-40s %10.1f %9.1f TFLOP/s\n", name, us, flops / (us * 1e-6) / 1e12);
  return true;
}

int Main() {
  if (gpu_check::DeviceCountOrSkip() == 0) return gpu_check::kExitSkip;
  gpu_check::PrintDevice(0, /*with_sms=*/true);
  std::printf("paged decode: head_dim 128, bf16, block_size 16, shuffled blocks; "
              "median of %d after %d warm-up\n",
              kIters, kWarmup);
  cudaStream_t stream;
  if (cudaStreamCreate(&stream) != cudaSuccess) return gpu_check::kExitFail;
  std::printf("queued: timed behind a spin kernel (launch latency hidden); idle: on an idle\n"
              "GPU, launch included (the copy's column: queued / idle time). %% copy: of the\n"
              "1 GiB copy's GB/s; last column: of a copy moving the same bytes as the case\n"
              "(its time / the case's time)\n");
  std::printf("%-40s %10s %9s %8s %10s %9s %11s\n", "case", "us", "GB/s", "% copy", "idle us",
              "% copy", "% same-copy");
  double copy_gbps = 0;
  bool ok = CopyBandwidth(stream, &copy_gbps);
  // The four the CUDA issue asks for, then GQA at a larger batch and at one
  // small enough to split.
  const DecodeCase cases[] = {{64, 1024, 32, 32}, {64, 1024, 32, 8}, {64, 4096, 32, 32},
                              {64, 4096, 32, 8},  {128, 1024, 32, 8}, {16, 4096, 32, 8}};
  // Each case on both kernels (simt: CUDA cores, mma: tensor cores, one CTA
  // per item; mma-persist: the same with persistent CTAs) and on the
  // automatic choice, the one that serves.
  for (const DecodeCase& dc : cases) {
    for (gpu::GpuDecodeKernel kernel :
         {gpu::GpuDecodeKernel::kSimt, gpu::GpuDecodeKernel::kTensorCores,
          gpu::GpuDecodeKernel::kTensorCoresPersistent, gpu::GpuDecodeKernel::kAuto}) {
      ok = ok && DecodeBandwidth(dc, kernel, copy_gbps, stream);
    }
  }
  // Prefill on tensor cores: whole 2k prompts, and 512-token chunks on a 3.5k
  // cached prefix (chunked prefill), GQA 32/8.
  for (const PrefillCase& pc :
       {PrefillCase{8, 2048, 2048, 32, 8}, PrefillCase{8, 4096, 512, 32, 8}}) {
    ok = ok && PrefillThroughput(pc, stream);
  }
  cudaStreamDestroy(stream);
  return ok ? gpu_check::kExitPass : gpu_check::kExitFail;
}

}  // namespace
}  // namespace folio::kernels

int main() { return folio::kernels::Main(); }
