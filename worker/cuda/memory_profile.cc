#include "worker/cuda/memory_profile.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "worker/cuda/cuda_kv_cache.h"

namespace folio::gpu {
namespace {

// One forward pass of `s` sequences with `query_len` new tokens each at
// context `context_len`, every block-table entry 0 and no token cached
// (slot -1): the cost of attending over `context_len` positions with a
// one-block cache.
CudaStatus RunPass(CudaModelRunner& runner, CudaKvCache& cache, int32_t s, int32_t query_len,
                   int32_t context_len, int32_t block_size) {
  const int32_t n = s * query_len;
  std::vector<int32_t> ids(n, 0), positions(n), query_start(s + 1), context_lens(s, context_len);
  std::vector<int64_t> slots(n, kernels::kSkipSlot);
  std::vector<int32_t> rows(s);
  const int32_t blocks_per_seq = (context_len + block_size - 1) / block_size;
  std::vector<int32_t> tables(size_t(s) * blocks_per_seq, 0);
  for (int32_t i = 0; i < s; ++i) {
    query_start[i] = i * query_len;
    for (int32_t t = 0; t < query_len; ++t) {
      positions[size_t(i) * query_len + t] = context_len - query_len + t;
    }
    rows[i] = (i + 1) * query_len - 1;
  }
  query_start[s] = n;
  CudaForwardBatch b;
  b.token_ids = ids;
  b.positions = positions;
  b.slot_mapping = slots;
  b.query_start = query_start;
  b.context_lens = context_lens;
  b.block_tables = tables;
  b.max_blocks_per_seq = blocks_per_seq;
  b.logits_rows = rows;
  FOLIO_RETURN_IF_NOT_OK(runner.Forward(b, cache));
  FOLIO_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(runner.stream()), "profile pass");
  return CudaStatus::Ok();
}

int64_t InUse() {
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
  return static_cast<int64_t>(total - free);
}

}  // namespace

std::string KvProfile::ToString() const {
  auto mib = [](int64_t b) { return double(b) / double(1 << 20); };
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "KV blocks %lld (%.1f MiB each): device %.0f MiB x utilization = %.0f MiB budget; "
                "in use %.0f MiB (weights %.0f, activations %.0f, other %.0f [context, cuBLAS, "
                "other processes]; profiling added %.0f); headroom %.0f MiB; KV cache %.0f MiB",
                static_cast<long long>(num_blocks), mib(block_bytes), mib(total_bytes),
                mib(budget_bytes), mib(in_use_bytes), mib(weights_bytes), mib(activation_bytes),
                mib(other_bytes), mib(profile_growth_bytes), mib(headroom_bytes), mib(kv_bytes));
  return buf;
}

CudaStatus ProfileKvBlocks(CudaModelRunner& runner, const KvProfileOptions& o, KvProfile* out) {
  const CudaModelRunner::Options& ro = runner.options();
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0) ||
      o.block_size <= 0 || o.max_num_batched_tokens < 0 || o.max_num_seqs < 0 ||
      o.max_model_len < 0) {
    return CudaStatus::InvalidArgument(
        "ProfileKvBlocks: gpu_memory_utilization must be in (0, 1], block_size > 0");
  }
  FOLIO_CUDA_RETURN_IF_ERROR(cudaSetDevice(ro.device), "cudaSetDevice");
  const int32_t max_len = o.max_model_len > 0 ? o.max_model_len
                          : ro.max_model_len > 0 ? ro.max_model_len
                                                 : runner.max_position();
  const int32_t tokens = std::min(
      o.max_num_batched_tokens > 0 ? o.max_num_batched_tokens : ro.max_num_tokens,
      ro.max_num_tokens);
  const int32_t max_rows = ro.max_logits_rows > 0 ? ro.max_logits_rows : ro.max_num_seqs;
  const int32_t seqs = std::min({o.max_num_seqs > 0 ? o.max_num_seqs : ro.max_num_seqs,
                                 ro.max_num_seqs, ro.max_num_tokens, max_rows});

  const int64_t before = InUse();
  {
    CudaKvCache::Options co;
    co.num_layers = runner.num_layers();
    co.num_kv_heads = runner.num_kv_heads();
    co.head_dim = runner.head_dim();
    co.block_size = o.block_size;
    co.num_device_blocks = 1;
    co.dtype = o.cache_dtype;
    co.zero_device_pool = true;
    std::unique_ptr<CudaKvCache> dummy;
    FOLIO_RETURN_IF_NOT_OK(CudaKvCache::Create(co, &dummy));
    // Prefill: `tokens` tokens in sequences of up to max_len tokens.
    const int32_t per_seq = std::min(tokens, max_len);
    const int32_t full = tokens / per_seq;
    if (full > 0) FOLIO_RETURN_IF_NOT_OK(RunPass(runner, *dummy, std::min(full, seqs), per_seq,
                                                 per_seq, o.block_size));
    // Decode: `seqs` sequences at the longest context.
    FOLIO_RETURN_IF_NOT_OK(RunPass(runner, *dummy, seqs, 1, max_len, o.block_size));
  }
  FOLIO_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  size_t free = 0, total = 0;
  FOLIO_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  KvProfile p;
  p.total_bytes = static_cast<int64_t>(total);
  p.in_use_bytes = static_cast<int64_t>(total - free);
  p.weights_bytes = runner.weight_bytes();
  p.activation_bytes = runner.activation_bytes();
  p.other_bytes = std::max<int64_t>(0, p.in_use_bytes - p.weights_bytes - p.activation_bytes);
  p.profile_growth_bytes = before >= 0 ? std::max<int64_t>(0, p.in_use_bytes - before) : 0;
  p.budget_bytes = static_cast<int64_t>(double(total) * o.gpu_memory_utilization);
  p.headroom_bytes = o.headroom_bytes >= 0
                         ? o.headroom_bytes
                         : std::max<int64_t>(int64_t{256} << 20, p.total_bytes / 50);
  p.kv_bytes = std::max<int64_t>(0, p.budget_bytes - p.in_use_bytes - p.headroom_bytes);
  p.block_bytes = CudaKvCache::BytesPerBlock(runner.num_layers(), runner.num_kv_heads(),
                                             runner.head_dim(), o.block_size, o.cache_dtype);
  p.num_blocks = p.kv_bytes / p.block_bytes;
  *out = p;
  return CudaStatus::Ok();
}

}  // namespace folio::gpu
