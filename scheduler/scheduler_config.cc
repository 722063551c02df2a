#include "scheduler/scheduler_config.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace folio {

absl::StatusOr<PreemptionMode> ParsePreemptionMode(std::string_view name) {
  if (name == "auto") return PreemptionMode::kAuto;
  if (name == "recompute") return PreemptionMode::kRecompute;
  if (name == "swap") return PreemptionMode::kSwap;
  return absl::InvalidArgumentError(
      absl::StrCat("preemption_mode must be auto, recompute or swap, not '", std::string(name), "'"));
}

absl::StatusOr<SchedulingPolicy> ParseSchedulingPolicy(std::string_view name) {
  if (name == "fcfs") return SchedulingPolicy::kFcfs;
  if (name == "priority") return SchedulingPolicy::kPriority;
  return absl::InvalidArgumentError(
      absl::StrCat("scheduling_policy must be fcfs or priority, not '", std::string(name), "'"));
}

absl::StatusOr<ReservationPolicy> ParseReservationPolicy(std::string_view name) {
  if (name == "none") return ReservationPolicy::kNone;
  if (name == "max") return ReservationPolicy::kMax;
  if (name == "pow2") return ReservationPolicy::kPow2;
  if (name == "oracle") return ReservationPolicy::kOracle;
  return absl::InvalidArgumentError(
      absl::StrCat("reservation must be none, max, pow2 or oracle, not '", std::string(name), "'"));
}

const char* ReservationPolicyName(ReservationPolicy policy) {
  switch (policy) {
    case ReservationPolicy::kNone: return "none";
    case ReservationPolicy::kMax: return "max";
    case ReservationPolicy::kPow2: return "pow2";
    case ReservationPolicy::kOracle: return "oracle";
  }
  return "unknown";
}

absl::StatusOr<BatchingMode> ParseBatchingMode(std::string_view name) {
  if (name == "continuous") return BatchingMode::kContinuous;
  if (name == "static") return BatchingMode::kStatic;
  return absl::InvalidArgumentError(
      absl::StrCat("batching must be continuous or static, not '", std::string(name), "'"));
}

const char* BatchingModeName(BatchingMode mode) {
  return mode == BatchingMode::kStatic ? "static" : "continuous";
}

const char* PreemptionModeName(PreemptionMode mode) {
  switch (mode) {
    case PreemptionMode::kAuto: return "auto";
    case PreemptionMode::kRecompute: return "recompute";
    case PreemptionMode::kSwap: return "swap";
  }
  return "unknown";
}

absl::Status SchedulerConfig::Validate() const {
  if (block_size != 8 && block_size != 16 && block_size != 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size must be 8, 16 or 32, not ", block_size));
  }
  if (num_device_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_device_blocks must be positive, not ", num_device_blocks));
  }
  if (num_host_blocks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_host_blocks must be >= 0, not ", num_host_blocks));
  }
  if (max_num_batched_tokens <= 0) {
    return absl::InvalidArgumentError("max_num_batched_tokens must be positive");
  }
  if (max_num_seqs <= 0) return absl::InvalidArgumentError("max_num_seqs must be positive");
  if (max_model_len <= 1) return absl::InvalidArgumentError("max_model_len must be at least 2");
  if (max_parallel_sequences <= 0) {
    return absl::InvalidArgumentError("max_parallel_sequences must be positive");
  }
  if (watermark < 0.0 || watermark >= 1.0) {
    return absl::InvalidArgumentError("watermark must be in [0, 1)");
  }
  if (sliding_window < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sliding_window must be >= 0 (0: none), not ", sliding_window));
  }
  if (host_tier_blocks_per_step < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host_tier_blocks_per_step must be >= -1 (-1: the token budget's, 0: no bound), not ",
        host_tier_blocks_per_step));
  }
  return absl::OkStatus();
}

int32_t WatermarkBlocks(double watermark, int32_t num_blocks) {
  return static_cast<int32_t>(std::floor(watermark * num_blocks));
}

int64_t RequestTokenSlots(const SchedulerConfig& config) {
  return int64_t{config.num_device_blocks - WatermarkBlocks(config.watermark,
                                                            config.num_device_blocks)} *
         config.block_size;
}

absl::StatusOr<int32_t> ResolveMaxModelLen(int32_t requested, int32_t model_max,
                                           int64_t token_slots, std::string* note) {
  if (note != nullptr) note->clear();
  if (requested < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-model-len must be >= 0 (0: the model's), not ", requested));
  }
  if (requested > 0) {
    if (requested > model_max) {
      // Positions past it have no rotary embedding on the workers (vLLM
      // refuses it too).
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-model-len ", requested, " exceeds the model's context of ", model_max,
          " positions (max_position_embeddings, times the factor of linear or yarn rope "
          "scaling)"));
    }
    if (requested > token_slots) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-model-len ", requested, " exceeds the ", token_slots,
          " token slots of the KV cache (those above its admission watermark): a request that "
          "long could never finish. Lower --max-model-len or give the cache more blocks"));
    }
    return requested;
  }
  if (model_max <= token_slots) return model_max;
  if (note != nullptr) {
    *note = absl::StrCat("max_model_len capped at ", token_slots,
                         " (the KV cache's token slots above its admission watermark; the model "
                         "allows ", model_max, ")");
  }
  return static_cast<int32_t>(token_slots);
}

}  // namespace folio
