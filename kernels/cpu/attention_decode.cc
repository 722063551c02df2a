// PagedAttentionDecode / ContiguousAttentionDecode: one query token per
// sequence; work items are (sequence, some or all of its KV heads
// [, context slice]), partitioned contexts merged with a softmax rescale.
// Shared primitives: kernels/cpu/attention_internal.h.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_internal.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/fail.h"

namespace folio::kernels {
namespace cpu {
namespace {

using namespace attention_internal;  // NOLINT(google-build-using-namespace): private helpers

// KV heads per decode work item: all of a sequence's heads when there are
// enough sequences to keep the threads busy (a block's heads are adjacent in
// memory, so the item streams through whole blocks), fewer otherwise.
int32_t HeadsPerItem(const Shape& sh) {
  const int64_t wanted = 4 * int64_t{MaxThreads()};
  int32_t heads = sh.num_kv_heads;
  while (heads > 1 && int64_t{sh.num_seqs} * (sh.num_kv_heads / heads) < wanted) {
    do {
      --heads;
    } while (sh.num_kv_heads % heads != 0);
  }
  return heads;
}

// Decode with `heads` KV heads per work item; partition_tokens > 0 splits
// every attended range (the context, or its last sliding_window positions)
// into slices of that many positions (separate items, merged at the end
// with a softmax rescale: vLLM's paged_attention_v2).
template <class SourceAt>
void Decode(const float* q, const Shape& sh, const int32_t* context_lens, float scale,
            int32_t heads, int32_t partition_tokens, int32_t sliding_window, float* out,
            SourceAt source_at) {
  const int32_t g = sh.group();
  const int32_t hd = sh.hd;
  const int32_t chunks = sh.num_kv_heads / heads;
  const int32_t m = heads * g;
  const bool partitioned = partition_tokens > 0;
  // Slices: (sequence, slice index); one per sequence when not partitioned.
  // A sequence with context 0 gets one empty slice.
  std::vector<int32_t> first_part(sh.num_seqs + 1, 0);
  double macs = 0;
  for (int32_t s = 0; s < sh.num_seqs; ++s) {
    const int32_t seen = context_lens[s] - FirstVisible(context_lens[s] - 1, sliding_window);
    const int32_t parts =
        partitioned ? std::max(1, (seen + partition_tokens - 1) / partition_tokens) : 1;
    first_part[s + 1] = first_part[s] + parts;
    macs += 2.0 * seen * sh.num_heads * hd;
  }
  const int32_t num_parts = first_part[sh.num_seqs];
  std::vector<int32_t> part_seq(num_parts);
  for (int32_t s = 0; s < sh.num_seqs; ++s) {
    std::fill(part_seq.begin() + first_part[s], part_seq.begin() + first_part[s + 1], s);
  }
  // Partitioned: partial state of (slice, query head) at slice * num_heads +
  // head: running max, running sum and acc[hd].
  const int64_t partial_rows = partitioned ? int64_t{num_parts} * sh.num_heads : 0;
  std::vector<float> part_max(partial_rows), part_sum(partial_rows), part_acc(partial_rows * hd);

  const int64_t items = int64_t{num_parts} * chunks;
  ForEachItem(items, macs, m, hd, [&](int64_t item, Scratch& sc) {
    const int32_t part = static_cast<int32_t>(item / chunks);
    const int32_t h = static_cast<int32_t>(item % chunks) * heads;
    const int32_t s = part_seq[part];
    const int32_t len = context_lens[s];
    const int32_t start = FirstVisible(len - 1, sliding_window);
    const int32_t begin = start + (partitioned ? (part - first_part[s]) * partition_tokens : 0);
    const int32_t end = partitioned ? std::min(len, begin + partition_tokens) : len;
    const int64_t head0 = int64_t{h} * g;  // first query head of the item
    const int64_t row0 = (int64_t{s} * sh.num_heads + head0) * hd;
    sc.Reset(m, hd);
    for (int32_t r = 0; r < m; ++r) {
      LoadQueryRow(q + row0 + int64_t{r} * hd, scale, hd, sc.q + int64_t{r} * hd);
      sc.limit[r] = len - 1;
      sc.first[r] = start;
    }
    AttendRange(source_at(s, h), sc, heads, g, begin, end);
    if (!partitioned) {
      for (int32_t r = 0; r < m; ++r) {
        StoreOutputRow(sc.acc + int64_t{r} * hd, sc.sum[r], hd, out + row0 + int64_t{r} * hd);
      }
      return;
    }
    const int64_t prow = int64_t{part} * sh.num_heads + head0;
    std::copy(sc.mx, sc.mx + m, part_max.begin() + prow);
    std::copy(sc.sum, sc.sum + m, part_sum.begin() + prow);
    std::copy(sc.acc, sc.acc + int64_t{m} * hd, part_acc.begin() + prow * hd);
  });
  if (!partitioned) return;

  // Merge: out = sum_p acc_p * e^(max_p - M) / sum_p sum_p * e^(max_p - M).
  const int64_t out_rows = int64_t{sh.num_seqs} * sh.num_heads;
  [[maybe_unused]] const bool parallel = out_rows * hd * 4 >= (1 << 16);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t orow = 0; orow < out_rows; ++orow) {
    const int32_t s = static_cast<int32_t>(orow / sh.num_heads);
    const int32_t head = static_cast<int32_t>(orow % sh.num_heads);
    float* __restrict o = out + orow * hd;
    float m_all = kNegInf;
    for (int32_t p = first_part[s]; p < first_part[s + 1]; ++p) {
      m_all = std::max(m_all, part_max[int64_t{p} * sh.num_heads + head]);
    }
    std::fill(o, o + hd, 0.0f);
    if (m_all == kNegInf) continue;  // empty context
    float total = 0.0f;
    for (int32_t p = first_part[s]; p < first_part[s + 1]; ++p) {
      const int64_t prow = int64_t{p} * sh.num_heads + head;
      if (part_max[prow] == kNegInf) continue;
      const float w = std::exp(part_max[prow] - m_all);
      total += part_sum[prow] * w;
      const float* __restrict a = part_acc.data() + prow * hd;
#pragma omp simd
      for (int32_t d = 0; d < hd; ++d) o[d] += w * a[d];
    }
    const float inv = 1.0f / total;
#pragma omp simd
    for (int32_t d = 0; d < hd; ++d) o[d] *= inv;
  }
}

// Resolves a DecodeSplit (0 = automatic) and decodes. Automatic: contexts
// are sliced (512 positions) only when there are too few (sequence, KV
// head) pairs to keep the threads busy and contexts are long; heads per
// item from HeadsPerItem.
template <class SourceAt>
void DecodeWithSplit(const float* q, const Shape& sh, const int32_t* context_lens, float scale,
                     const DecodeSplit& split, int32_t sliding_window, float* out,
                     SourceAt source_at) {
  int32_t partition = split.partition_tokens;
  if (partition == 0) {
    int32_t max_len = 0;  // of the attended ranges
    for (int32_t s = 0; s < sh.num_seqs; ++s) {
      const int32_t seen = context_lens[s] - FirstVisible(context_lens[s] - 1, sliding_window);
      max_len = std::max(max_len, seen);
    }
    const bool few_items = int64_t{sh.num_seqs} * sh.num_kv_heads < 2 * int64_t{MaxThreads()};
    partition = few_items && max_len >= 2 * kDefaultPartitionTokens ? kDefaultPartitionTokens : -1;
  }
  const int32_t heads = split.heads_per_item > 0 ? split.heads_per_item : HeadsPerItem(sh);
  Decode(q, sh, context_lens, scale, heads, partition, sliding_window, out, source_at);
}

}  // namespace


bool ValidateDecodeSplit(const DecodeSplit& split, int32_t num_kv_heads, std::string* error) {
  if (split.heads_per_item < 0 || split.heads_per_item > num_kv_heads ||
      (split.heads_per_item > 0 && num_kv_heads % split.heads_per_item != 0)) {
    return Fail(error, "heads_per_item " + std::to_string(split.heads_per_item) +
                           " does not divide num_kv_heads " + std::to_string(num_kv_heads));
  }
  if (split.partition_tokens < -1) {
    return Fail(error, "partition_tokens " + std::to_string(split.partition_tokens) + " < -1");
  }
  return true;
}

void PagedAttentionDecode(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                          const int32_t* context_lens, int32_t num_heads, float scale, float* out,
                          int32_t sliding_window) {
  PagedAttentionDecodeSplit(q, kv, tables, context_lens, num_heads, scale, DecodeSplit{}, out,
                            sliding_window);
}

void PagedAttentionDecodeSplit(const float* q, const PagedKvLayer& kv, const BlockTables& tables,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               const DecodeSplit& split, float* out, int32_t sliding_window) {
  const Shape sh{tables.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  WithPagedSource(kv, tables, [&](auto source_at) {
    DecodeWithSplit(q, sh, context_lens, scale, split, sliding_window, out, source_at);
  });
}

void ContiguousAttentionDecode(const float* q, const ContiguousKvLayer& kv,
                               const int32_t* context_lens, int32_t num_heads, float scale,
                               float* out, int32_t sliding_window) {
  const Shape sh{kv.num_seqs, num_heads, kv.num_kv_heads, kv.head_dim};
  DecodeWithSplit(q, sh, context_lens, scale, DecodeSplit{}, sliding_window, out,
                  ContiguousSourceAt(kv));
}

}  // namespace cpu
}  // namespace folio::kernels
