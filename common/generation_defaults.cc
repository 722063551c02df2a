#include "common/generation_defaults.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using json = nlohmann::json;

absl::Status Bad(std::string_view source, const char* field, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(source), ": field '", field, "' ", what));
}

// A number field that is present and not null, unless it equals
// transformers' default (`hf_default`), which recommends nothing.
absl::StatusOr<std::optional<double>> Number(const json& root, const char* field,
                                             std::optional<double> hf_default,
                                             std::string_view source) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return Bad(source, field, absl::StrCat("must be a number, got ", it->dump()));
  const double v = it->get<double>();
  if (!std::isfinite(v)) return Bad(source, field, "must be finite");
  if (hf_default.has_value() && v == *hf_default) return std::optional<double>();
  return std::optional<double>(v);
}

}  // namespace

bool SamplingDefaults::empty() const {
  return !temperature && !top_p && !top_k && !min_p && !repetition_penalty && !max_tokens;
}

std::string SamplingDefaults::ToString() const {
  std::string out;
  auto add = [&](const char* name, const auto& v) {
    if (v.has_value()) absl::StrAppend(&out, out.empty() ? "" : " ", name, "=", *v);
  };
  add("temperature", temperature);
  add("top_p", top_p);
  add("top_k", top_k);
  add("min_p", min_p);
  add("repetition_penalty", repetition_penalty);
  add("max_tokens", max_tokens);
  return out.empty() ? "none" : out;
}

void SamplingDefaults::ApplyTo(SamplingParams* p) const {
  if (temperature) p->temperature = *temperature;
  if (top_p) p->top_p = *top_p;
  if (top_k) p->top_k = *top_k;
  if (min_p) p->min_p = *min_p;
  if (repetition_penalty) p->repetition_penalty = *repetition_penalty;
  if (max_tokens) p->max_tokens = *max_tokens;
}

absl::StatusOr<SamplingDefaults> ParseSamplingDefaults(std::string_view json_text,
                                                       std::string_view source) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": invalid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": expected a JSON object"));
  }
  // Each field's value, unless absent, null or transformers' own default.
  struct Field {
    const char* name;
    std::optional<double> hf_default;
    std::optional<double> value = std::nullopt;
  };
  Field temperature{"temperature", 1.0}, top_p{"top_p", 1.0}, top_k{"top_k", 50.0},
      min_p{"min_p", std::nullopt}, repetition_penalty{"repetition_penalty", 1.0},
      max_new_tokens{"max_new_tokens", std::nullopt};
  for (Field* f : {&temperature, &top_p, &top_k, &min_p, &repetition_penalty, &max_new_tokens}) {
    absl::StatusOr<std::optional<double>> v = Number(root, f->name, f->hf_default, source);
    if (!v.ok()) return v.status();
    f->value = *v;
  }
  // The checks ValidateSamplingParams makes of a request, here so a bad file
  // fails at startup rather than every request that relies on it.
  // Kept as floats: larger values would become inf.
  constexpr double kMaxFloat = std::numeric_limits<float>::max();
  auto integral = [](double v, double lo) { return v == std::floor(v) && v >= lo && v <= INT32_MAX; };
  SamplingDefaults d;
  if (const auto& v = temperature.value) {
    if (*v < 0) return Bad(source, "temperature", absl::StrCat("must be >= 0, got ", *v));
    if (*v > kMaxFloat) return Bad(source, "temperature", absl::StrCat("is too large: ", *v));
    d.temperature = static_cast<float>(*v);
  }
  if (const auto& v = top_p.value) {
    // As the float that is kept: 1e-46 would round to 0.
    if (!(static_cast<float>(*v) > 0 && *v <= 1)) {
      return Bad(source, "top_p", absl::StrCat("must be in (0, 1], got ", *v));
    }
    d.top_p = static_cast<float>(*v);
  }
  if (const auto& v = top_k.value) {
    if (!integral(*v, -1)) return Bad(source, "top_k", absl::StrCat("must be an integer >= -1, got ", *v));
    d.top_k = *v <= 0 ? 0 : static_cast<int32_t>(*v);  // 0 and -1: off
  }
  if (const auto& v = min_p.value) {
    if (!(*v >= 0 && *v <= 1)) return Bad(source, "min_p", absl::StrCat("must be in [0, 1], got ", *v));
    d.min_p = static_cast<float>(*v);
  }
  if (const auto& v = repetition_penalty.value) {
    if (!(static_cast<float>(*v) > 0)) {
      return Bad(source, "repetition_penalty", absl::StrCat("must be > 0, got ", *v));
    }
    if (*v > kMaxFloat) return Bad(source, "repetition_penalty", absl::StrCat("is too large: ", *v));
    d.repetition_penalty = static_cast<float>(*v);
  }
  if (const auto& v = max_new_tokens.value) {
    if (!integral(*v, 1)) {
      return Bad(source, "max_new_tokens", absl::StrCat("must be an integer >= 1, got ", *v));
    }
    d.max_tokens = static_cast<int32_t>(*v);
  }
  return d;
}

absl::StatusOr<SamplingDefaults> LoadSamplingDefaults(const std::string& setting,
                                                      const std::string& model_dir,
                                                      std::string* source) {
  if (source != nullptr) source->clear();
  // "vllm" is vLLM's spelling of none (its neutral defaults).
  if (setting == "none" || setting == "vllm") return SamplingDefaults();
  const bool from_model = setting == "auto" || setting.empty();
  const std::string path =
      (std::filesystem::path(from_model ? model_dir : setting) / "generation_config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (from_model) return SamplingDefaults();
    return absl::NotFoundError(absl::StrCat("--generation-config ", setting, ": ", path,
                                            " does not exist (auto, none or a directory with one)"));
  }
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  if (source != nullptr) *source = path;
  return ParseSamplingDefaults(*text, path);
}

}  // namespace folio
