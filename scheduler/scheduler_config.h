#ifndef FOLIO_SCHEDULER_SCHEDULER_CONFIG_H_
#define FOLIO_SCHEDULER_SCHEDULER_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace folio {

// What happens to a request whose blocks are taken back under memory pressure.
enum class PreemptionMode {
  kAuto,       // recompute single-sequence requests, swap multi-sequence ones
  kRecompute,  // free the blocks; prefill prompt + generated tokens again later
  kSwap,       // move the blocks to the host pool; back when room returns
};

enum class SchedulingPolicy { kFcfs, kPriority };

// How much KV memory a request claims at admission. kNone is paging on
// demand (folio's behaviour); the others model the systems before paging, for
// benchmarks and the simulator.
enum class ReservationPolicy {
  kNone,    // blocks as tokens arrive
  kMax,     // max_model_len tokens
  kPow2,    // the next power of two of prompt + output length
  kOracle,  // exactly prompt + output length (the output length must be known)
};

// When waiting requests may join the batch that runs.
enum class BatchingMode {
  kContinuous,  // every step (iteration-level scheduling: Orca's, vLLM's, folio's)
  kStatic,      // only once the whole previous batch has finished: a request-level
                // batcher in front of FasterTransformer, the PagedAttention paper's baseline
};

absl::StatusOr<PreemptionMode> ParsePreemptionMode(std::string_view name);
absl::StatusOr<SchedulingPolicy> ParseSchedulingPolicy(std::string_view name);
absl::StatusOr<ReservationPolicy> ParseReservationPolicy(std::string_view name);
const char* ReservationPolicyName(ReservationPolicy policy);
absl::StatusOr<BatchingMode> ParseBatchingMode(std::string_view name);
const char* BatchingModeName(BatchingMode mode);
const char* PreemptionModeName(PreemptionMode mode);

class ReservationSpace;

struct SchedulerConfig {
  int32_t block_size = 16;  // 8, 16 or 32
  int32_t num_device_blocks = 0;
  int32_t num_host_blocks = 0;
  int32_t max_num_batched_tokens = 2048;  // token budget of one step
  int32_t max_num_seqs = 256;             // running sequences at most
  int32_t max_model_len = 2048;           // prompt + output tokens at most
  int32_t max_parallel_sequences = 64;    // cap on best_of / beam_width
  bool enable_prefix_caching = true;
  // The prefix cache's host tier (KvCacheManager::Options::host_prefix_cache).
  bool host_prefix_cache = false;
  // Host-tier blocks moved per step in each direction
  // (KvCacheManager::Options::host_tier_blocks_per_step): -1 = as many as
  // the step's token budget fills (max_num_batched_tokens / block_size),
  // 0 = no bound.
  int32_t host_tier_blocks_per_step = -1;
  double watermark = 0.01;  // share of device blocks kept free at admission
  // The model's attention window when every layer has one (the largest), so
  // blocks before it can be released; 0 = some layer sees everything.
  int32_t sliding_window = 0;
  PreemptionMode preemption_mode = PreemptionMode::kAuto;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  ReservationPolicy reservation = ReservationPolicy::kNone;
  BatchingMode batching = BatchingMode::kContinuous;
  // Optional contiguous slot space consulted at admission under a reservation
  // policy (models pre-paging allocators); not owned; may be null.
  ReservationSpace* reservation_space = nullptr;
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;  // after every step, in debug builds and tests
#endif

  absl::Status Validate() const;
};

// Device blocks admission keeps free: floor(watermark x num_blocks).
int32_t WatermarkBlocks(double watermark, int32_t num_blocks);

// Token slots one request can be admitted into: the device blocks above the
// watermark, times the block size.
int64_t RequestTokenSlots(const SchedulerConfig& config);

// The max_model_len to serve with, once the KV pool is sized. `requested`
// > 0 is the user's (--max-model-len): at most model_max, and it must fit in token_slots
// (RequestTokenSlots): longer would accept requests that can never be
// admitted or finish, so it is an InvalidArgumentError naming the flag.
// requested 0 takes model_max (ModelConfig::MaxModelLen), capped at
// token_slots; *note (when not null) then says why it was capped, for the
// startup log, and is left empty otherwise.
absl::StatusOr<int32_t> ResolveMaxModelLen(int32_t requested, int32_t model_max,
                                           int64_t token_slots, std::string* note = nullptr);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SCHEDULER_CONFIG_H_
