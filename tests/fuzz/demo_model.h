#ifndef FOLIO_TESTS_FUZZ_DEMO_MODEL_H_
#define FOLIO_TESTS_FUZZ_DEMO_MODEL_H_

// The served model of the request-parsing fuzz targets: models/folio-demo's
// tokenizer, config and chat template, loaded once, with the RequestLimits
// folio-scheduler derives from them; and the properties every request
// ParseGenerateRequest accepts must have.

#include <memory>
#include <string>

#include "common/chat_template.h"
#include "common/model_config.h"
#include "common/sampling_params.h"
#include "common/tokenizer.h"
#include "scheduler/server/generate_request.h"
#include "tests/fuzz/fuzz_util.h"

namespace folio::fuzz {

struct DemoModel {
  std::unique_ptr<Tokenizer> tokenizer;
  ModelConfig config;
  std::unique_ptr<ChatTemplate> chat_template;  // tokenizer_config.json's
  RequestLimits limits;                 // first-come first-served, no model defaults
  RequestLimits limits_with_defaults;   // priority scheduling, generation_config defaults
};

inline const DemoModel& Demo() {
  static const DemoModel* demo = [] {
    auto* d = new DemoModel();
    const std::string dir = SourcePath("models/folio-demo");
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromDirectory(dir);
    FUZZ_CHECK(t.ok(), "%s", t.status().ToString().c_str());
    d->tokenizer = *std::move(t);
    absl::StatusOr<ModelConfig> c = ModelConfig::LoadFromDirectory(dir);
    FUZZ_CHECK(c.ok(), "%s", c.status().ToString().c_str());
    d->config = *std::move(c);
    if (d->config.bos_token_id.has_value()) d->tokenizer->set_bos_token_id(d->config.bos_token_id);
    absl::StatusOr<std::unique_ptr<ChatTemplate>> ct = ChatTemplate::Load(dir, "");
    FUZZ_CHECK(ct.ok(), "%s", ct.status().ToString().c_str());
    d->chat_template = *std::move(ct);
    d->limits.vocab_size = d->config.vocab_size;
    d->limits.max_model_len = d->config.MaxModelLen();
    d->limits.eos_token_ids = d->config.eos_token_ids;
    d->limits_with_defaults = d->limits;
    d->limits_with_defaults.priority_scheduling = true;
    d->limits_with_defaults.sampling_defaults.temperature = 0.6f;
    d->limits_with_defaults.sampling_defaults.top_p = 0.9f;
    d->limits_with_defaults.sampling_defaults.max_tokens = 64;
    return d;
  }();
  return *demo;
}

// What an accepted request promises the engine.
inline void CheckParsedRequest(const ParsedRequest& r, const RequestLimits& limits) {
  const int32_t vocab = limits.vocab_size;
  auto in_vocab = [vocab](TokenId t) { return t >= 0 && t < vocab; };
  FUZZ_CHECK(!r.spec.prompt.empty(), "empty prompt accepted");
  FUZZ_CHECK(static_cast<int64_t>(r.spec.prompt.size()) + 1 <= limits.max_model_len,
             "prompt of %zu tokens accepted; max_model_len %d", r.spec.prompt.size(),
             limits.max_model_len);
  for (TokenId t : r.spec.prompt) FUZZ_CHECK(in_vocab(t), "prompt token %d outside the vocab", t);
  const SamplingParams& p = r.spec.sampling;
  absl::Status valid = ValidateSamplingParams(p);
  FUZZ_CHECK(valid.ok(), "accepted sampling params are invalid: %s", valid.ToString().c_str());
  for (const TokenBias& b : p.logit_bias) FUZZ_CHECK(in_vocab(b.token), "logit_bias token %d", b.token);
  for (TokenId t : p.stop_token_ids) FUZZ_CHECK(in_vocab(t), "stop token %d", t);
  for (TokenId t : p.allowed_token_ids) FUZZ_CHECK(in_vocab(t), "allowed token %d", t);
  for (const auto& word : p.bad_words_token_ids) {
    FUZZ_CHECK(!word.empty(), "empty bad word");
    for (TokenId t : word) FUZZ_CHECK(in_vocab(t), "bad-word token %d", t);
  }
  for (const std::string& s : r.stop_strings) FUZZ_CHECK(!s.empty(), "empty stop string");
  if (r.request_id.has_value()) {
    FUZZ_CHECK(!r.request_id->empty() && r.request_id->size() <= 256, "request id of %zu bytes",
               r.request_id->size());
  }
  if (!limits.priority_scheduling) FUZZ_CHECK(r.spec.priority == 0, "priority without the policy");
  FUZZ_CHECK(r.spec.eos_token_ids == limits.eos_token_ids, "eos ids not the model's");
}

}  // namespace folio::fuzz

#endif  // FOLIO_TESTS_FUZZ_DEMO_MODEL_H_
