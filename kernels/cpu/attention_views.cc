#include "kernels/cpu/attention_views.h"

#include "kernels/fail.h"

namespace folio::kernels {
namespace {

bool CheckShape(const void* k, const void* v, int64_t a, int32_t num_kv_heads, int64_t b,
                int32_t head_dim, const char* a_name, const char* b_name, std::string* error) {
  if (k == nullptr || v == nullptr) return Fail(error, "null K or V pointer");
  if (a <= 0 || num_kv_heads <= 0 || b <= 0 || head_dim <= 0) {
    return Fail(error, std::string(a_name) + ", num_kv_heads, " + b_name +
                           " and head_dim must be positive");
  }
  if (head_dim % 8 != 0) {
    return Fail(error, "head_dim " + std::to_string(head_dim) + " is not a multiple of 8");
  }
  return true;
}

}  // namespace

bool ValidatePagedKvLayer(const PagedKvLayer& kv, std::string* error) {
  if (kv.dtype != CacheDtype::kFloat32 && !IsQuantized(kv.dtype)) {
    return Fail(error, "the CPU attention reads fp32, int8 or fp8 e4m3 caches");
  }
  return CheckShape(kv.k, kv.v, kv.num_blocks, kv.num_kv_heads, kv.block_size, kv.head_dim,
                    "num_blocks", "block_size", error);
}

bool ValidateContiguousKvLayer(const ContiguousKvLayer& kv, std::string* error) {
  return CheckShape(kv.k, kv.v, kv.num_seqs, kv.num_kv_heads, kv.max_seq_len, kv.head_dim,
                    "num_seqs", "max_seq_len", error);
}

bool ValidateHeadCounts(int32_t num_heads, int32_t num_kv_heads, std::string* error) {
  if (num_heads <= 0 || num_kv_heads <= 0) return Fail(error, "head counts must be positive");
  if (num_heads % num_kv_heads != 0) {
    return Fail(error, "num_heads " + std::to_string(num_heads) +
                           " is not a multiple of num_kv_heads " + std::to_string(num_kv_heads));
  }
  return true;
}

bool ValidateBlockTables(const BlockTables& tables, const int32_t* context_lens, int32_t block_size,
                         int32_t num_blocks, std::string* error) {
  if (tables.num_seqs < 0 || tables.max_blocks_per_seq < 0) {
    return Fail(error, "negative block table shape");
  }
  if (block_size <= 0) return Fail(error, "block_size must be positive");
  if (tables.num_seqs == 0) return true;
  if (context_lens == nullptr) return Fail(error, "null context_lens");
  if (tables.ids == nullptr && tables.max_blocks_per_seq > 0) {
    return Fail(error, "null block table ids");
  }
  const int64_t capacity = int64_t{tables.max_blocks_per_seq} * block_size;
  for (int32_t s = 0; s < tables.num_seqs; ++s) {
    const int32_t len = context_lens[s];
    if (len < 0 || len > capacity) {
      return Fail(error, "sequence " + std::to_string(s) + " context " + std::to_string(len) +
                             " outside [0, " + std::to_string(capacity) + "]");
    }
    const int32_t used = (len + block_size - 1) / block_size;
    const int32_t* row = tables.ids + int64_t{s} * tables.max_blocks_per_seq;
    for (int32_t i = 0; i < used; ++i) {
      if (row[i] < 0 || row[i] >= num_blocks) {
        return Fail(error, "sequence " + std::to_string(s) + " table entry " + std::to_string(i) +
                               " block " + std::to_string(row[i]) + " outside [0, " +
                               std::to_string(num_blocks) + ")");
      }
    }
  }
  return true;
}

bool ValidateContextLens(const int32_t* context_lens, int32_t num_seqs, int32_t max_seq_len,
                         std::string* error) {
  if (num_seqs > 0 && context_lens == nullptr) return Fail(error, "null context_lens");
  for (int32_t s = 0; s < num_seqs; ++s) {
    if (context_lens[s] < 0 || context_lens[s] > max_seq_len) {
      return Fail(error, "sequence " + std::to_string(s) + " context " +
                             std::to_string(context_lens[s]) + " outside [0, " +
                             std::to_string(max_seq_len) + "]");
    }
  }
  return true;
}

bool ValidateQueryStarts(const int32_t* query_start, const int32_t* context_lens, int32_t num_seqs,
                         std::string* error) {
  if (num_seqs < 0) return Fail(error, "negative num_seqs");
  if (query_start == nullptr) return Fail(error, "null query_start");
  if (num_seqs > 0 && context_lens == nullptr) return Fail(error, "null context_lens");
  if (query_start[0] < 0) return Fail(error, "query_start[0] is negative");
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t len = query_start[s + 1] - query_start[s];
    if (len < 0) return Fail(error, "query_start decreases at sequence " + std::to_string(s));
    if (len > context_lens[s]) {
      return Fail(error, "sequence " + std::to_string(s) + " has " + std::to_string(len) +
                             " query tokens but context " + std::to_string(context_lens[s]));
    }
  }
  return true;
}

}  // namespace folio::kernels
