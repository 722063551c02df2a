// Host side of the CUDA paged attention: argument checks, the decode's
// partition choice and workspace layout, and dispatch to the SIMT
// (attention_simt.cu) and tensor-core (attention_mma.cu) kernels.
#include "kernels/cuda/attention.cuh"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_internal.cuh"
#include "kernels/fail.h"

namespace folio::kernels::gpu {
namespace {

using internal::AttnParams;

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int32_t Log2(int32_t x) {
  int32_t n = 0;
  while ((1 << n) < x) ++n;
  return n;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Query rows (heads of a group) one SIMT decode CTA serves; larger groups
// are cut into chunks of this many rows, separate CTAs that share K/V
// through L2. A tensor-core CTA serves one m16 tile (kMmaDecodeRows).
constexpr int32_t kMaxSimtDecodeRows = 8;

// Whether the decode runs on tensor cores: forced, or by default for GQA
// over 16-bit caches (MHA, which the SIMT kernel already streams at copy
// bandwidth, and fp32 caches stay on CUDA cores).
bool ForcesTensorCores(GpuDecodeKernel kernel) {
  return kernel == GpuDecodeKernel::kTensorCores ||
         kernel == GpuDecodeKernel::kTensorCoresPersistent;
}
bool DecodeOnTensorCores(GpuDecodeKernel kernel, CacheDtype dtype, int32_t group) {
  return ForcesTensorCores(kernel) ||
         (kernel == GpuDecodeKernel::kAuto && dtype != CacheDtype::kFloat32 && group >= 2);
}

int32_t DecodeRowsPerCta(bool tensor_cores, int32_t group) {
  return tensor_cores ? internal::kMmaDecodeRows : std::min(group, kMaxSimtDecodeRows);
}

// SM count of the current device, cached per device (lock-free; a race
// only queries the attribute twice).
int32_t CurrentDeviceSms() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int32_t> cache[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  if (device >= 0 && device < kMaxDevices) {
    const int32_t known = cache[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      sms <= 0) {
    return 1;
  }
  if (device >= 0 && device < kMaxDevices) cache[device].store(sms, std::memory_order_relaxed);
  return sms;
}

// Common checks of the decode and prefill arguments.
bool CheckCommon(const float* q, const GpuPagedKvLayer& kv, const BlockTables& tables,
                 int32_t num_heads, float scale, const float* out) {
  if (!ValidateGpuPagedKvLayer(kv) || !ValidateHeadCounts(num_heads, kv.num_kv_heads)) {
    return false;
  }
  if (q == nullptr || out == nullptr || !Aligned16(q) || !Aligned16(out)) return false;
  if (tables.num_seqs < 0 || tables.max_blocks_per_seq < 0) return false;
  if (tables.ids == nullptr && tables.max_blocks_per_seq > 0) return false;
  if (!std::isfinite(scale)) return false;
  // Grid limits: sequences on y, KV heads on z (prefill) / x (decode).
  return tables.num_seqs <= 65535 && kv.num_kv_heads <= 65535;
}

AttnParams BaseParams(const float* q, const GpuPagedKvLayer& kv, const BlockTables& tables,
                      const int32_t* context_lens, int32_t num_heads, float scale, float* out) {
  AttnParams p;
  p.q = q;
  p.out = out;
  p.k = kv.k;
  p.v = kv.v;
  p.block_tables = tables.ids;
  p.context_lens = context_lens;
  p.max_blocks_per_seq = tables.max_blocks_per_seq;
  p.num_heads = num_heads;
  p.num_kv_heads = kv.num_kv_heads;
  p.group = num_heads / kv.num_kv_heads;
  p.block_shift = Log2(kv.block_size);
  p.scale_log2 = scale * internal::kLog2e;
  return p;
}

}  // namespace

bool ValidateGpuPagedKvLayer(const GpuPagedKvLayer& kv, std::string* error) {
  if (kv.dtype != CacheDtype::kFloat32 && kv.dtype != CacheDtype::kFloat16 &&
      kv.dtype != CacheDtype::kBFloat16) {
    return Fail(error, "unknown cache dtype " + std::to_string(static_cast<int>(kv.dtype)));
  }
  if (kv.k == nullptr || kv.v == nullptr) return Fail(error, "null K or V pointer");
  if (!Aligned16(kv.k) || !Aligned16(kv.v)) return Fail(error, "K or V not 16-byte aligned");
  if (kv.num_blocks <= 0 || kv.num_kv_heads <= 0) {
    return Fail(error, "num_blocks and num_kv_heads must be positive");
  }
  if (kv.head_dim != 64 && kv.head_dim != 128 && kv.head_dim != 256) {
    return Fail(error, "head_dim " + std::to_string(kv.head_dim) + " not in {64, 128, 256}");
  }
  if (kv.block_size != 8 && kv.block_size != 16 && kv.block_size != 32) {
    return Fail(error, "block_size " + std::to_string(kv.block_size) + " not in {8, 16, 32}");
  }
  return true;
}

int32_t DecodeReadLength(int32_t max_context_len, int32_t sliding_window, int32_t block_size) {
  if (sliding_window <= 0) return max_context_len;
  // In int64: a window near INT32_MAX must not overflow.
  return static_cast<int32_t>(
      std::min<int64_t>(max_context_len, int64_t{sliding_window} + block_size - 1));
}

int32_t ChooseDecodePartition(int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                              int32_t max_context_len, int32_t partition_tokens, int32_t num_sms,
                              CacheDtype dtype, GpuDecodeKernel kernel) {
  if (partition_tokens != 0) return partition_tokens < 0 ? -1 : partition_tokens;
  if (max_context_len < 2 * kGpuMinAutoPartitionTokens || num_seqs <= 0 || num_kv_heads <= 0 ||
      num_heads < num_kv_heads) {
    return -1;
  }
  const int32_t group = num_heads / num_kv_heads;
  const int32_t rows = DecodeRowsPerCta(DecodeOnTensorCores(kernel, dtype, group), group);
  const int64_t ctas = int64_t{num_seqs} * num_kv_heads * CeilDiv(group, rows);
  const int64_t sms = std::max(num_sms, 1);
  // Two resident CTAs per SM keep enough K/V bytes in flight (each has at
  // least two 16 KiB tiles outstanding); fewer leave bandwidth unused.
  if (ctas >= 2 * sms) return -1;
  const int64_t parts = CeilDiv(4 * sms, ctas);
  const int64_t q = kGpuMinAutoPartitionTokens;
  const int64_t slice = std::max(q, CeilDiv(CeilDiv(max_context_len, parts), q) * q);
  if (CeilDiv(max_context_len, slice) < 2) return -1;
  return static_cast<int32_t>(slice);
}

size_t PagedAttentionDecodeWorkspaceBytes(int32_t num_seqs, int32_t num_heads, int32_t head_dim,
                                          int32_t max_context_len, int32_t partition_tokens) {
  if (num_seqs <= 0 || num_heads <= 0 || head_dim <= 0 || max_context_len <= 0 ||
      partition_tokens < 0) {
    return 0;
  }
  int64_t slice = partition_tokens;
  if (slice == 0) {
    if (max_context_len < 2 * kGpuMinAutoPartitionTokens) return 0;
    slice = kGpuMinAutoPartitionTokens;  // the smallest automatic slice: most parts
  }
  const int64_t parts = CeilDiv(max_context_len, slice);
  if (parts <= 1) return 0;
  // [rows][head_dim] accumulators, then [rows] maxima, then [rows] sums.
  const int64_t rows = int64_t{num_seqs} * num_heads * parts;
  return static_cast<size_t>(rows * (int64_t{head_dim} + 2) * int64_t{sizeof(float)});
}

cudaError_t PagedAttentionDecode(const float* q, const GpuPagedKvLayer& kv,
                                 const BlockTables& tables, const int32_t* context_lens,
                                 int32_t max_context_len, int32_t num_heads, float scale,
                                 void* workspace, size_t workspace_bytes, float* out,
                                 cudaStream_t stream, int32_t partition_tokens,
                                 GpuDecodeKernel kernel, int32_t sliding_window) {
  if (!CheckCommon(q, kv, tables, num_heads, scale, out) || sliding_window < 0) {
    return cudaErrorInvalidValue;
  }
  const int32_t num_seqs = tables.num_seqs;
  if (num_seqs > 0 && context_lens == nullptr) return cudaErrorInvalidValue;
  if (max_context_len < 0 ||
      int64_t{max_context_len} > int64_t{tables.max_blocks_per_seq} * kv.block_size) {
    return cudaErrorInvalidValue;
  }
  if (partition_tokens < -1 || (partition_tokens > 0 && partition_tokens % kv.block_size != 0)) {
    return cudaErrorInvalidValue;
  }
  const size_t needed = PagedAttentionDecodeWorkspaceBytes(num_seqs, num_heads, kv.head_dim,
                                                           max_context_len, partition_tokens);
  if (workspace_bytes < needed || (needed > 0 && (workspace == nullptr || !Aligned16(workspace)))) {
    return cudaErrorInvalidValue;
  }
  const bool sixteen_bit = kv.dtype != CacheDtype::kFloat32;
  if ((kernel != GpuDecodeKernel::kAuto && kernel != GpuDecodeKernel::kSimt &&
       !ForcesTensorCores(kernel)) ||
      (ForcesTensorCores(kernel) && !sixteen_bit)) {
    return cudaErrorInvalidValue;
  }
  if (num_seqs == 0) return cudaSuccess;

  AttnParams p = BaseParams(q, kv, tables, context_lens, num_heads, scale, out);
  p.sliding_window = sliding_window;
  const bool tensor_cores = DecodeOnTensorCores(kernel, kv.dtype, p.group);
  p.rows_per_cta = DecodeRowsPerCta(tensor_cores, p.group);
  p.row_chunks = static_cast<int32_t>(CeilDiv(p.group, p.rows_per_cta));
  // SIMT: 1, 2 or 4 warps take different rows, the others share the keys of
  // the same rows. heads_per_thread covers the rest.
  p.head_warps = p.rows_per_cta >= 4 ? 4 : p.rows_per_cta >= 2 ? 2 : 1;
  const int32_t heads_per_thread = p.rows_per_cta > p.head_warps ? 2 : 1;
  if (int64_t{p.num_kv_heads} * p.row_chunks > INT32_MAX) return cudaErrorInvalidValue;

  const int32_t read_len = DecodeReadLength(max_context_len, sliding_window, kv.block_size);
  const int32_t sms = CurrentDeviceSms();
  const int32_t slice =
      partition_tokens == 0 ? ChooseDecodePartition(num_seqs, num_heads, kv.num_kv_heads,
                                                    read_len, 0, sms, kv.dtype, kernel)
                            : partition_tokens;
  const int64_t parts = slice > 0 ? std::max<int64_t>(1, CeilDiv(read_len, slice)) : 1;
  if (parts > 65535) return cudaErrorInvalidValue;
  if (parts > 1) {
    // The slice may differ from what the caller sized for only if it is
    // larger, and read_len <= max_context_len: fewer parts, so the layout
    // below fits in `needed`.
    const int64_t rows = int64_t{num_seqs} * num_heads * parts;
    p.partition_tokens = slice;
    p.max_parts = static_cast<int32_t>(parts);
    p.part_acc = static_cast<float*>(workspace);
    p.part_max = p.part_acc + rows * kv.head_dim;
    p.part_sum = p.part_max + rows;
  }
  cudaError_t err =
      tensor_cores
          ? internal::LaunchMmaDecode(p, kv.dtype, kv.head_dim, num_seqs,
                                      kernel == GpuDecodeKernel::kTensorCoresPersistent, sms,
                                      stream)
          : internal::LaunchSimtDecode(p, kv.dtype, kv.head_dim, heads_per_thread, num_seqs,
                                       stream);
  if (err != cudaSuccess || parts <= 1) return err;
  return internal::LaunchDecodeReduce(p, kv.head_dim, num_seqs, stream);
}

cudaError_t PagedAttentionPrefill(const float* q, const GpuPagedKvLayer& kv,
                                  const BlockTables& tables, const int32_t* query_start,
                                  const int32_t* context_lens, int32_t num_seqs,
                                  int32_t max_query_len, int32_t num_heads, float scale,
                                  float* out, cudaStream_t stream, int32_t sliding_window) {
  if (!CheckCommon(q, kv, tables, num_heads, scale, out) || sliding_window < 0) {
    return cudaErrorInvalidValue;
  }
  if (num_seqs < 0 || num_seqs > tables.num_seqs || max_query_len < 0) {
    return cudaErrorInvalidValue;
  }
  if (num_seqs > 0 && (query_start == nullptr || context_lens == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (num_seqs == 0 || max_query_len == 0) return cudaSuccess;
  AttnParams p = BaseParams(q, kv, tables, context_lens, num_heads, scale, out);
  p.query_start = query_start;
  p.sliding_window = sliding_window;
  if (int64_t{max_query_len} * p.group > INT32_MAX) return cudaErrorInvalidValue;
  if (kv.dtype == CacheDtype::kFloat32) {
    p.rows_per_cta = 8;  // 4 head warps x 2 rows
    p.head_warps = 4;
    return internal::LaunchSimtPrefill(p, kv.head_dim, num_seqs, max_query_len, stream);
  }
  return internal::LaunchMmaPrefill(p, kv.dtype, kv.head_dim, num_seqs, max_query_len, stream);
}

}  // namespace folio::kernels::gpu
