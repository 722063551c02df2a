#ifndef FOLIO_COMMON_GENERATION_DEFAULTS_H_
#define FOLIO_COMMON_GENERATION_DEFAULTS_H_

// The sampling defaults a model's creator recommends in its
// generation_config.json (Llama 3 Instruct: temperature 0.6, top_p 0.9),
// applied to requests that leave those fields unset, as vLLM does by default
// (its --generation-config auto). Read: temperature, top_p, top_k, min_p,
// repetition_penalty and max_new_tokens (as max_tokens). Like vLLM, which
// reads transformers' GenerationConfig.to_diff_dict(), a value equal to
// transformers' own default (temperature 1.0, top_p 1.0, top_k 50,
// repetition_penalty 1.0) or null recommends nothing.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/sampling_params.h"

namespace folio {

struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;  // 0 = off
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int32_t> max_tokens;

  bool empty() const;
  // "temperature=0.6 top_p=0.9", or "none".
  std::string ToString() const;
  // Sets in `p` every default this holds, for a caller whose request left
  // all of those fields unset (folio run's base parameters).
  void ApplyTo(SamplingParams* p) const;
};

// Parses generation_config.json text. INVALID_ARGUMENT naming `source` and
// the field for bad JSON or a value no request could use (say top_p 0).
absl::StatusOr<SamplingDefaults> ParseSamplingDefaults(std::string_view json_text,
                                                       std::string_view source);

// What `--generation-config SETTING` selects: "auto" reads
// <model_dir>/generation_config.json when it exists (none otherwise); "none"
// (or "vllm", vLLM's name for it) gives no defaults; anything else is a directory whose
// generation_config.json must exist. *source (when not null) gets the file
// read, or "" when none was.
absl::StatusOr<SamplingDefaults> LoadSamplingDefaults(const std::string& setting,
                                                      const std::string& model_dir,
                                                      std::string* source);

}  // namespace folio

#endif  // FOLIO_COMMON_GENERATION_DEFAULTS_H_
