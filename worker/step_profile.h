// Where a CPU worker's step time goes: wall time per part of the forward pass
// (GEMMs by layer kind, norms, RoPE, KV writes, attention, ...), summed over
// steps, decode-only steps apart from the rest. `folio run --timing` prints
// it. Off unless a profile is attached: then each part costs two clock reads.
#ifndef FOLIO_WORKER_STEP_PROFILE_H_
#define FOLIO_WORKER_STEP_PROFILE_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace folio {

enum class StepPart : int {
  kPlan,        // cache ops, the plan mirror, building the batch
  kEmbed,       // token embedding
  kNorm,        // RMSNorm (input, post-attention, final)
  kQkvGemm,     // the fused q/k/v projection (and its bias)
  kRope,        // rotary embedding
  kKvWrite,     // reshape-and-cache: this step's K and V into their slots
  kAttention,   // paged attention over the cache
  kOGemm,       // the output projection
  kMlpGemm,     // gate-up and down projections
  kActivation,  // SiLU-and-mul
  kResidual,    // the residual adds
  kAllReduce,   // tensor-parallel sums (zero at one rank)
  kLmHead,      // the LM head and the logits gather
  kSampling,    // sampling the next tokens (rank 0)
  kCount,
};

std::string_view StepPartName(StepPart part);

// Sums over the steps of one kind.
struct StepTimes {
  std::array<int64_t, static_cast<int>(StepPart::kCount)> nanos{};
  int64_t steps = 0;
  int64_t tokens = 0;  // tokens computed (a decode step: one per sequence)
  int64_t total_nanos = 0;  // whole steps, parts and what falls between them

  int64_t& operator[](StepPart p) { return nanos[static_cast<int>(p)]; }
  int64_t operator[](StepPart p) const { return nanos[static_cast<int>(p)]; }

  StepTimes& operator+=(const StepTimes& other) {
    for (size_t p = 0; p < nanos.size(); ++p) nanos[p] += other.nanos[p];
    steps += other.steps;
    tokens += other.tokens;
    total_nanos += other.total_nanos;
    return *this;
  }
};

struct StepProfile {
  StepTimes decode;  // steps whose every sequence computes one token
  StepTimes other;   // steps with prompt tokens (prefill or mixed)
};

// Adds the time from construction to destruction to (*times)[part]; a no-op
// when times is null.
class ScopedStepPart {
 public:
  ScopedStepPart(StepTimes* times, StepPart part)
      : times_(times), part_(part), start_(times != nullptr ? Now() : 0) {}
  ~ScopedStepPart() {
    if (times_ != nullptr) (*times_)[part_] += Now() - start_;
  }
  ScopedStepPart(const ScopedStepPart&) = delete;
  ScopedStepPart& operator=(const ScopedStepPart&) = delete;

  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  StepTimes* const times_;
  const StepPart part_;
  const int64_t start_;
};

// Per step of that kind: each part's mean in ms and share of the step, e.g.
// "decode steps: 999, 1.0 tokens each, 0.781 ms a step\n  qkv gemm  0.102 ms  13.1%\n...".
// Empty when `times` holds no step.
std::string FormatStepTimes(std::string_view kind, const StepTimes& times);

}  // namespace folio

#endif  // FOLIO_WORKER_STEP_PROFILE_H_
