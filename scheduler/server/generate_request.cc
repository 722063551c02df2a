#include "scheduler/server/generate_request.h"

#include "absl/strings/str_cat.h"
#include "common/bad_words.h"
#include "common/sampling_params.h"

namespace folio {
namespace {

// A repeated proto field of token ids, as a span.
std::span<const TokenId> Ids(const google::protobuf::RepeatedField<int32_t>& ids) {
  return {ids.data(), static_cast<size_t>(ids.size())};
}

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, " ", what));
}

// Public SamplingParams (with proto3 optionals) -> the engine's, defaults filled.
absl::StatusOr<SamplingParams> ConvertSampling(const v1::SamplingParams& in,
                                               const SamplingDefaults& defaults) {
  SamplingParams p;
  defaults.ApplyTo(&p);  // then the request's own values win
  if (in.has_temperature()) p.temperature = in.temperature();
  if (in.has_top_k()) p.top_k = in.top_k() == -1 ? 0 : in.top_k();
  if (in.has_top_p()) p.top_p = in.top_p();
  if (in.has_min_p()) p.min_p = in.min_p();
  if (in.has_repetition_penalty()) p.repetition_penalty = in.repetition_penalty();
  p.presence_penalty = in.presence_penalty();
  p.frequency_penalty = in.frequency_penalty();
  if (in.has_seed()) p.seed = in.seed();
  p.n = in.n() == 0 ? 1 : static_cast<int32_t>(in.n());
  p.beam_width = in.beam_width() == 0 ? 1 : static_cast<int32_t>(in.beam_width());
  p.best_of = in.best_of() == 0 ? p.n : static_cast<int32_t>(in.best_of());
  if (in.has_length_penalty()) p.length_penalty = in.length_penalty();
  if (in.has_max_tokens()) {
    if (in.max_tokens() == 0) return Invalid("sampling_params.max_tokens", "must be at least 1, got 0");
    p.max_tokens = static_cast<int32_t>(std::min<uint32_t>(in.max_tokens(), INT32_MAX));
  }
  p.ignore_eos = in.ignore_eos();
  p.stop_token_ids.assign(in.stop_token_ids().begin(), in.stop_token_ids().end());
  if (in.min_tokens() > static_cast<uint32_t>(p.max_tokens)) {  // before it can wrap
    const bool from_model = !in.has_max_tokens() && defaults.max_tokens.has_value();
    return Invalid("sampling_params.min_tokens",
                   absl::StrCat("must be at most max_tokens (", p.max_tokens,
                                from_model ? ", the model's generation_config.json default" : "",
                                "), got ", in.min_tokens()));
  }
  p.min_tokens = static_cast<int32_t>(in.min_tokens());
  for (const auto& [token, bias] : in.logit_bias()) p.logit_bias.push_back({token, bias});
  SortLogitBias(&p.logit_bias);
  p.allowed_token_ids.assign(in.allowed_token_ids().begin(), in.allowed_token_ids().end());
  SortUniqueTokenIds(&p.allowed_token_ids);
  // Unsigned counts beyond int32 would wrap: name them before they do.
  for (auto [name, value] : {std::pair{"n", in.n()}, std::pair{"best_of", in.best_of()},
                             std::pair{"beam_width", in.beam_width()}}) {
    if (value > 4096) return Invalid(absl::StrCat("sampling_params.", name), absl::StrCat("is too large: ", value));
  }
  // Top-alternative counts, named before a large one can wrap.
  for (auto [name, value] : {std::pair{"logprobs", in.logprobs()},
                             std::pair{"prompt_logprobs", in.prompt_logprobs()}}) {
    if (value > static_cast<uint32_t>(kMaxLogprobs)) {
      return Invalid(absl::StrCat("sampling_params.", name),
                     absl::StrCat("must be in [0, ", kMaxLogprobs, "], got ", value));
    }
  }
  if (in.has_logprobs()) p.logprobs = static_cast<int32_t>(in.logprobs());
  if (in.has_prompt_logprobs()) p.prompt_logprobs = static_cast<int32_t>(in.prompt_logprobs());
  if (absl::Status s = ValidateSamplingParams(p); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling_params.", s.message()));
  }
  return p;
}

}  // namespace

absl::Status CheckTokenIds(std::span<const TokenId> ids, int32_t vocab_size,
                           std::string_view field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(absl::StrCat(std::string(field), "[", i, "]"),
                     absl::StrCat("is ", ids[i], ", outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ParsedRequest> ParseGenerateRequest(const v1::GenerateRequest& request,
                                                   const Tokenizer& tokenizer,
                                                   const RequestLimits& limits) {
  ParsedRequest out;
  if (request.has_request_id()) {
    if (request.request_id().empty()) return Invalid("request_id", "must not be empty when set");
    if (request.request_id().size() > 256) return Invalid("request_id", "is longer than 256 bytes");
    out.request_id = request.request_id();
  }

  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      if (request.text().empty()) return Invalid("text", "must not be empty");
      out.spec.prompt = tokenizer.EncodePrompt(request.text());
      break;
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return Invalid("token_ids.ids", "must not be empty");
      if (absl::Status s = CheckTokenIds(Ids(ids), limits.vocab_size, "token_ids.ids"); !s.ok()) {
        return s;
      }
      out.spec.prompt.assign(ids.begin(), ids.end());
      break;
    }
    default:
      return Invalid("prompt", "is missing: set text or token_ids");
  }
  if (out.spec.prompt.empty()) return Invalid("text", "tokenizes to no tokens");
  if (request.sampling_params().has_truncate_prompt_tokens()) {
    if (absl::Status s = TruncatePrompt(request.sampling_params().truncate_prompt_tokens(),
                                        limits.max_model_len, &out.spec.prompt);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("sampling_params.", s.message()));
    }
  }
  const int64_t prompt_len = static_cast<int64_t>(out.spec.prompt.size());
  if (prompt_len + 1 > limits.max_model_len) {
    return Invalid("prompt", absl::StrCat("has ", prompt_len, " tokens; max_model_len is ",
                                          limits.max_model_len,
                                          " (prompt + at least 1 new token)"));
  }

  const v1::SamplingParams& sp = request.sampling_params();
  // Before conversion sorts them, so that the message names the entry given.
  if (absl::Status s = CheckTokenIds(Ids(sp.allowed_token_ids()), limits.vocab_size,
                                     "sampling_params.allowed_token_ids");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<SamplingParams> sampling = ConvertSampling(sp, limits.sampling_defaults);
  if (!sampling.ok()) return sampling.status();
  if (absl::Status s = CheckTokenIds(Ids(sp.stop_token_ids()), limits.vocab_size,
                                     "sampling_params.stop_token_ids");
      !s.ok()) {
    return s;
  }
  if (sp.bad_words_size() > 0) {
    const std::vector<std::string> words(sp.bad_words().begin(), sp.bad_words().end());
    absl::StatusOr<std::vector<std::vector<TokenId>>> bad =
        BadWordsTokenIds(tokenizer, words, "sampling_params.bad_words");
    if (!bad.ok()) return bad.status();
    sampling->bad_words_token_ids = *std::move(bad);
  }
  if (absl::Status s = CheckAllowedTokensLeaveAChoice(*sampling, limits.eos_token_ids); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling_params.", s.message()));
  }
  for (const TokenBias& b : sampling->logit_bias) {
    if (b.token >= limits.vocab_size) {
      return Invalid(absl::StrCat("sampling_params.logit_bias[", b.token, "]"),
                     absl::StrCat("names a token outside the vocabulary [0, ", limits.vocab_size,
                                  ")"));
    }
  }
  for (int i = 0; i < sp.stop_size(); ++i) {
    if (sp.stop(i).empty()) return Invalid(absl::StrCat("sampling_params.stop[", i, "]"), "must not be empty");
  }
  out.stop_strings.assign(sp.stop().begin(), sp.stop().end());
  out.text.include_stop = sp.include_stop_str_in_output();
  out.text.skip_special_tokens = !sp.has_skip_special_tokens() || sp.skip_special_tokens();
  out.text.min_tokens = sampling->min_tokens;
  if (sp.has_logprobs()) out.logprobs = sampling->logprobs;

  out.spec.sampling = std::move(*sampling);
  if (sp.priority() != 0 && !limits.priority_scheduling) {
    return Invalid("sampling_params.priority",
                   absl::StrCat("is ", sp.priority(),
                                ", but the server schedules first-come first-served: start "
                                "folio-scheduler with --scheduling-policy priority to use it"));
  }
  out.spec.priority = sp.priority();
  out.spec.cache_salt = sp.cache_salt();
  out.spec.eos_token_ids = limits.eos_token_ids;
  return out;
}

}  // namespace folio
