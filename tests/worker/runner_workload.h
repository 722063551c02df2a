// The ModelRunner workload the tensor-parallel tests share: ranks on threads,
// two prefills (7 and 20 tokens) then one decode each, the logits of every
// row. Header-only, for tests/worker.
#ifndef FOLIO_TESTS_WORKER_RUNNER_WORKLOAD_H_
#define FOLIO_TESTS_WORKER_RUNNER_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/cache_engine.h"
#include "worker/communicator.h"
#include "worker/model_runner.h"
#include "worker/model_weights.h"

namespace folio::testing {

// Runs fn(rank) on one thread per rank and joins them.
template <typename F>
void OnRanks(int world, F&& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

// Rank `rank` of `world` (comm null for one rank) runs the workload on the
// model in `dir`; *step0 and *step1 get its logits per step (empty on ranks
// other than 0, which the runner must leave empty).
inline absl::Status RunTwoStepWorkload(const std::string& dir, int rank, int world,
                                       Communicator* comm, std::vector<float>* step0,
                                       std::vector<float>* step1) {
  constexpr int32_t kBlock = 16;
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir, ShardSpec{rank, world});
  if (!w.ok()) return w.status();
  const ModelConfig& c = (*w)->config;
  CacheEngine::Options co;
  co.num_layers = c.num_layers;
  co.num_kv_heads = (*w)->shape.num_kv_heads;
  co.head_dim = c.head_dim;
  co.block_size = kBlock;
  co.num_device_blocks = 8;
  absl::StatusOr<std::unique_ptr<CacheEngine>> cache = CacheEngine::Create(co);
  if (!cache.ok()) return cache.status();
  ModelRunner runner(**w, **cache, comm);
  const std::vector<std::vector<int32_t>> tables = {{0}, {1, 2}};
  std::vector<std::vector<TokenId>> tokens(2);
  for (int t = 0; t < 7; ++t) tokens[0].push_back((t * 37 + 5) % c.vocab_size);
  for (int t = 0; t < 20; ++t) tokens[1].push_back((t * 101 + 998) % c.vocab_size);
  for (int step = 0; step < 2; ++step) {
    ForwardBatch b;
    b.max_blocks_per_seq = 2;
    b.query_start.push_back(0);
    for (int s = 0; s < 2; ++s) {
      const int32_t len = static_cast<int32_t>(tokens[s].size());
      const int32_t begin = step == 0 ? 0 : len - 1;
      for (int32_t p = begin; p < len; ++p) {
        b.logits_rows.push_back(b.num_tokens());
        b.token_ids.push_back(tokens[s][p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(int64_t{tables[s][p / kBlock]} * kBlock + p % kBlock);
      }
      b.query_start.push_back(b.num_tokens());
      b.context_lens.push_back(len);
      for (int32_t k = 0; k < 2; ++k) {
        b.block_tables.push_back(k < static_cast<int32_t>(tables[s].size()) ? tables[s][k] : 0);
      }
    }
    std::vector<float> logits;
    if (absl::Status s = runner.Forward(b, logits); !s.ok()) return s;
    if (rank != 0 && !logits.empty()) return absl::InternalError("logits on rank != 0");
    *(step == 0 ? step0 : step1) = std::move(logits);
    tokens[0].push_back(3);
    tokens[1].push_back(998);
  }
  return absl::OkStatus();
}

}  // namespace folio::testing

#endif  // FOLIO_TESTS_WORKER_RUNNER_WORKLOAD_H_
