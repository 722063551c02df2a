#include "common/sampling_params.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace folio {

absl::Status CheckAllowedTokensLeaveAChoice(const SamplingParams& p,
                                            std::span<const TokenId> eos_token_ids) {
  auto contains = [](const auto& range, TokenId t) {
    return std::find(range.begin(), range.end(), t) != range.end();
  };
  for (TokenId t : p.allowed_token_ids) {
    const bool bad_word = std::any_of(p.bad_words_token_ids.begin(), p.bad_words_token_ids.end(),
                                      [t](const auto& w) { return w.size() == 1 && w[0] == t; });
    const bool ends = p.min_tokens > 0 && (contains(eos_token_ids, t) ||
                                           contains(p.stop_token_ids, t));
    if (!bad_word && !ends) return absl::OkStatus();
  }
  if (p.allowed_token_ids.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "allowed_token_ids leaves no token to sample: each is a one-token bad word",
      p.min_tokens > 0 ? " or ends the sequence before min_tokens (" : "",
      p.min_tokens > 0 ? absl::StrCat(p.min_tokens, ")") : ""));
}

void SortUniqueTokenIds(std::vector<TokenId>* ids) {
  std::sort(ids->begin(), ids->end());
  ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
}

void SortLogitBias(std::vector<TokenBias>* biases) {
  std::vector<TokenBias>& v = *biases;
  std::stable_sort(v.begin(), v.end(),
                   [](const TokenBias& a, const TokenBias& b) { return a.token < b.token; });
  // Of each run of one token keep the last (stable: the last given).
  size_t kept = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i + 1 < v.size() && v[i + 1].token == v[i].token) continue;
    v[kept++] = v[i];
  }
  v.resize(kept);
}

absl::Status TruncatePrompt(int32_t k, int32_t max_model_len, std::vector<TokenId>* prompt) {
  if (k == 0 || k < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("truncate_prompt_tokens must be >= 1, or -1 for max_model_len - 1, got ", k));
  }
  if (k > max_model_len) {  // as vLLM: a size no prompt may have
    return absl::InvalidArgumentError(absl::StrCat(
        "truncate_prompt_tokens must be at most max_model_len (", max_model_len, "), got ", k));
  }
  const size_t keep = static_cast<size_t>(k == -1 ? std::max(1, max_model_len - 1) : k);
  if (prompt->size() > keep) prompt->erase(prompt->begin(), prompt->end() - keep);
  return absl::OkStatus();
}

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    return bad("temperature must be non-negative, got ", p.temperature);
  }
  if (p.top_k < 0) return bad("top_k must be positive, or 0 or -1 to disable it, got ", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p must be in (0, 1], got ", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p must be in [0, 1], got ", p.min_p);
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty)) {
    return bad("repetition_penalty must be positive, got ", p.repetition_penalty);
  }
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2.0f) {
    return bad("presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  }
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2.0f) {
    return bad("frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  }
  if (p.logprobs < 0 || p.logprobs > kMaxLogprobs) {
    return bad("logprobs must be in [0, ", kMaxLogprobs, "], got ", p.logprobs);
  }
  if (p.prompt_logprobs.has_value() &&
      (*p.prompt_logprobs < 0 || *p.prompt_logprobs > kMaxLogprobs)) {
    return bad("prompt_logprobs must be in [0, ", kMaxLogprobs, "], got ", *p.prompt_logprobs);
  }
  if (p.max_tokens < 1) return bad("max_tokens must be at least 1, got ", p.max_tokens);
  if (p.n < 1) return bad("n must be at least 1, got ", p.n);
  if (p.beam_width < 1) return bad("beam_width must be at least 1, got ", p.beam_width);
  if (p.beam_width == 1 && p.best_of < p.n) {
    return bad("best_of must be >= n (", p.n, "), got ", p.best_of);
  }
  if (p.beam_width > 1) {
    // Beam search returns its n best beams; best_of has no meaning there.
    if (p.best_of != 1 && p.best_of != p.n) {
      return bad("best_of cannot be combined with beam_width > 1");
    }
    if (p.n > p.beam_width) {
      return bad("n must be <= beam_width (", p.beam_width, ") with beam search, got ", p.n);
    }
  }
  if (!std::isfinite(p.length_penalty)) return bad("length_penalty must be finite");
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) {
    return bad("min_tokens must be in [0, max_tokens (", p.max_tokens, ")], got ", p.min_tokens);
  }
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    const TokenBias& b = p.logit_bias[i];
    if (b.token < 0) return bad("logit_bias has a negative token id, ", b.token);
    if (!(std::fabs(b.bias) <= kMaxLogitBias)) {
      return bad("logit_bias[", b.token, "] must be in [-", kMaxLogitBias, ", ", kMaxLogitBias,
                 "], got ", b.bias);
    }
    if (i > 0 && b.token <= p.logit_bias[i - 1].token) {
      return bad("logit_bias tokens must be ascending and distinct, got ", b.token, " after ",
                 p.logit_bias[i - 1].token);
    }
  }
  for (size_t i = 0; i < p.end_token_ids.size(); ++i) {
    if (p.end_token_ids[i] < 0) {
      return bad("end_token_ids[", i, "] must be non-negative, got ", p.end_token_ids[i]);
    }
  }
  for (size_t i = 0; i < p.stop_token_ids.size(); ++i) {
    if (p.stop_token_ids[i] < 0) {
      return bad("stop_token_ids[", i, "] must be non-negative, got ", p.stop_token_ids[i]);
    }
  }
  for (size_t i = 0; i < p.allowed_token_ids.size(); ++i) {
    const TokenId t = p.allowed_token_ids[i];
    if (t < 0) return bad("allowed_token_ids[", i, "] must be non-negative, got ", t);
    if (i > 0 && t <= p.allowed_token_ids[i - 1]) {
      return bad("allowed_token_ids must be ascending and distinct, got ", t, " after ",
                 p.allowed_token_ids[i - 1]);
    }
  }
  for (size_t i = 0; i < p.bad_words_token_ids.size(); ++i) {
    const std::vector<TokenId>& word = p.bad_words_token_ids[i];
    if (word.empty()) return bad("bad_words_token_ids[", i, "] must not be empty");
    for (TokenId t : word) {
      if (t < 0) return bad("bad_words_token_ids[", i, "] has a negative token id, ", t);
    }
  }
  return absl::OkStatus();
}

}  // namespace folio
