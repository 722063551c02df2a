#include "worker/vocab_parallel.h"

#include <algorithm>
#include <cstring>

namespace folio {

absl::Status VocabParallelEmbed(const ModelWeights& w, const kernels::cpu::PackedMatrix& table,
                                Communicator* comm, const TokenId* ids, int32_t n, float* out) {
  const size_t d = w.config.hidden_size;
  const int64_t begin = w.shape.vocab_begin, count = w.shape.vocab_count;
  for (int32_t t = 0; t < n; ++t) {
    const int64_t local = int64_t{ids[t]} - begin;
    float* row = out + size_t(t) * d;
    if (local >= 0 && local < count) {
      table.Row(static_cast<int32_t>(local), row);
    } else {
      std::memset(row, 0, sizeof(float) * d);
    }
  }
  if (comm == nullptr || comm->world_size() == 1) return absl::OkStatus();
  return comm->AllReduceSum(out, int64_t{n} * int64_t(d));
}

absl::Status GatherVocabParallelLogits(const ModelWeights& w, Communicator& comm,
                                       const float* local, int32_t r,
                                       std::vector<float>& scratch, std::vector<float>& logits) {
  if (r == 0) {
    logits.clear();
    return absl::OkStatus();
  }
  // Every rank sends an [r][vocab_padded] block (its short rows padded with
  // zeros) so the gather has one size; rank 0 interleaves them by row.
  const int32_t world = comm.world_size(), padded = w.shape.vocab_padded;
  const int32_t count = w.shape.vocab_count, vocab = w.config.vocab_size;
  const size_t chunk = size_t(r) * padded;
  const bool root = comm.rank() == 0;
  scratch.assign(chunk * (root ? world + 1 : 1), 0.0f);
  for (int32_t i = 0; i < r; ++i) {
    std::memcpy(&scratch[size_t(i) * padded], local + size_t(i) * count, sizeof(float) * count);
  }
  float* recv = root ? scratch.data() + chunk : nullptr;
  if (absl::Status s = comm.GatherToRank0(scratch.data(), int64_t(chunk), recv); !s.ok()) return s;
  if (!root) {
    logits.clear();
    return absl::OkStatus();
  }
  logits.resize(size_t(r) * vocab);
  // The partition of ShardShape::Make: the first vocab % world ranks hold one more.
  const int32_t base = vocab / world, extra = vocab % world;
  for (int32_t q = 0; q < world; ++q) {
    const int32_t begin = q * base + std::min(q, extra);
    const int32_t n = base + (q < extra ? 1 : 0);
    const float* block = recv + size_t(q) * chunk;
    for (int32_t i = 0; i < r; ++i) {
      std::memcpy(&logits[size_t(i) * vocab + begin], block + size_t(i) * padded,
                  sizeof(float) * n);
    }
  }
  return absl::OkStatus();
}

}  // namespace folio
