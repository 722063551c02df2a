// Fuzzes generation_config.json parsing, both readers of it
// (common/generation_defaults.h, common/model_config.h): the sampling
// defaults (ParseSamplingDefaults) and the end tokens merged into a model's
// config (ModelConfig::MergeGenerationConfig). The input is the file's text.
// Checks: no crash or exception escapes; errors are INVALID_ARGUMENT naming
// the source; accepted defaults are ones a request can use (applied to the
// default SamplingParams, ValidateSamplingParams passes) and print; merged end
// tokens are non-negative and keep the config's own.

#include <algorithm>
#include <cstdint>

#include "common/generation_defaults.h"
#include "common/model_config.h"
#include "common/sampling_params.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = folio::fuzz::AsText(data, size);

  absl::StatusOr<folio::SamplingDefaults> d =
      folio::ParseSamplingDefaults(text, "generation_config.json");
  if (!d.ok()) {
    FUZZ_CHECK(d.status().code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
               d.status().ToString().c_str());
  } else {
    folio::SamplingParams p;
    d->ApplyTo(&p);
    absl::Status valid = folio::ValidateSamplingParams(p);
    FUZZ_CHECK(valid.ok(), "accepted defaults %s make invalid sampling params: %s",
               d->ToString().c_str(), valid.ToString().c_str());
    FUZZ_CHECK(!d->ToString().empty(), "empty ToString");
    FUZZ_CHECK(d->empty() == (d->ToString() == "none"), "empty() disagrees with ToString()");
  }

  folio::ModelConfig c;
  c.eos_token_ids = {7};
  absl::Status merged = folio::ModelConfig::MergeGenerationConfig(text, "generation_config.json", c);
  if (!merged.ok()) {
    FUZZ_CHECK(merged.code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
               merged.ToString().c_str());
    FUZZ_CHECK(merged.message().find("generation_config.json") != absl::string_view::npos,
               "error does not name the file: %s", merged.ToString().c_str());
  } else {
    FUZZ_CHECK(std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), 7) != c.eos_token_ids.end(),
               "the config's own end token was dropped");
    for (folio::TokenId id : c.eos_token_ids) FUZZ_CHECK(id >= 0, "negative end token %d", id);
  }
  return 0;
}
