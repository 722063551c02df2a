#include "worker/step_profile.h"

#include "absl/strings/str_format.h"

namespace folio {

std::string_view StepPartName(StepPart part) {
  switch (part) {
    case StepPart::kPlan: return "plan";
    case StepPart::kEmbed: return "embedding";
    case StepPart::kNorm: return "rms norm";
    case StepPart::kQkvGemm: return "qkv gemm";
    case StepPart::kRope: return "rope";
    case StepPart::kKvWrite: return "kv write";
    case StepPart::kAttention: return "attention";
    case StepPart::kOGemm: return "o gemm";
    case StepPart::kMlpGemm: return "mlp gemms";
    case StepPart::kActivation: return "silu and mul";
    case StepPart::kResidual: return "residual add";
    case StepPart::kAllReduce: return "all-reduce";
    case StepPart::kLmHead: return "lm head";
    case StepPart::kSampling: return "sampling";
    case StepPart::kCount: break;
  }
  return "?";
}

std::string FormatStepTimes(std::string_view kind, const StepTimes& times) {
  if (times.steps == 0) return "";
  const double steps = static_cast<double>(times.steps);
  const double step_ms = 1e-6 * static_cast<double>(times.total_nanos) / steps;
  std::string out = absl::StrFormat("%s steps: %d, %.1f tokens each, %.3f ms a step\n", kind,
                                    times.steps, static_cast<double>(times.tokens) / steps,
                                    step_ms);
  int64_t parts = 0;
  auto line = [&](std::string_view name, int64_t nanos) {
    const double ms = 1e-6 * static_cast<double>(nanos) / steps;
    absl::StrAppendFormat(&out, "  %-13s %8.3f ms %5.1f%%\n", name, ms,
                          step_ms > 0 ? 100.0 * ms / step_ms : 0.0);
  };
  for (int p = 0; p < static_cast<int>(StepPart::kCount); ++p) {
    const int64_t nanos = times.nanos[p];
    parts += nanos;
    if (nanos > 0) line(StepPartName(static_cast<StepPart>(p)), nanos);
  }
  line("unaccounted", times.total_nanos - parts);
  return out;
}

}  // namespace folio
