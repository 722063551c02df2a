#ifndef FOLIO_WORKER_VOCAB_PARALLEL_H_
#define FOLIO_WORKER_VOCAB_PARALLEL_H_

// The vocabulary-parallel ends of the model (Megatron's
// VocabParallelEmbedding and parallel LM head): each rank holds the rows
// [vocab_begin, vocab_begin + vocab_count) of embed_tokens / lm_head
// (ShardShape). With one rank (or a null communicator) the embedding is the
// plain full-vocabulary lookup.
//
// Every rank of the group must make the same calls with the same sizes.
// Thread-compatible: the buffers are the caller's.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "common/types.h"
#include "worker/communicator.h"
#include "kernels/cpu/packed_gemm.h"
#include "worker/model_weights.h"

namespace folio {

// out[n][hidden] = embedding rows of ids[0:n]: this rank's rows (of
// `table`, [vocab_count][hidden]) for ids in its slice, zeros for the
// others, then summed over ranks (`comm` may be null for one rank).
// REQUIRES: every id in [0, vocab_size).
absl::Status VocabParallelEmbed(const ModelWeights& w, const kernels::cpu::PackedMatrix& table,
                                Communicator* comm, const TokenId* ids, int32_t n, float* out);

// Rank 0: logits[r][vocab_size] assembled from every rank's
// local[r][vocab_count] (its rows x its lm_head slice^T). Other ranks:
// `logits` is cleared. `scratch` is reused between calls.
absl::Status GatherVocabParallelLogits(const ModelWeights& w, Communicator& comm,
                                       const float* local, int32_t r,
                                       std::vector<float>& scratch, std::vector<float>& logits);

}  // namespace folio

#endif  // FOLIO_WORKER_VOCAB_PARALLEL_H_
