#include "common/plan_proto.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace folio {
namespace {

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

std::string Indexed(const char* name, int i) { return absl::StrCat(name, "[", i, "]"); }

template <typename Repeated>
absl::Status CheckNonNegative(const std::string& field, const Repeated& values, const char* what) {
  for (int i = 0; i < values.size(); ++i) {
    if (values.Get(i) < 0) {
      return Bad(Indexed(field.c_str(), i),
                 absl::StrCat(what, " must be non-negative, got ", values.Get(i)));
    }
  }
  return absl::OkStatus();
}

template <typename Vec, typename Repeated>
void CopyRepeated(const Repeated& in, Vec* out) {
  out->assign(in.begin(), in.end());
}

absl::Status FromProtoCopies(const char* name,
                             const google::protobuf::RepeatedPtrField<v1::BlockCopy>& in,
                             std::vector<BlockCopy>* out) {
  out->clear();
  out->reserve(in.size());
  for (int i = 0; i < in.size(); ++i) {
    const v1::BlockCopy& c = in.Get(i);
    if (c.src() < 0 || c.dst() < 0) {
      return Bad(Indexed(name, i),
                 absl::StrCat("block ids must be non-negative, got ", c.src(), " -> ", c.dst()));
    }
    out->push_back({c.src(), c.dst()});
  }
  return absl::OkStatus();
}

void ToProtoCopies(const std::vector<BlockCopy>& in,
                   google::protobuf::RepeatedPtrField<v1::BlockCopy>* out) {
  out->Reserve(static_cast<int>(in.size()));
  for (const BlockCopy& c : in) {
    v1::BlockCopy* p = out->Add();
    p->set_src(c.src);
    p->set_dst(c.dst);
  }
}

absl::Status FromProtoNew(const v1::NewSequence& in, const std::string& field,
                          NewSequenceData* out) {
  if (in.seq_id() < 0) return Bad(field + ".seq_id", absl::StrCat("negative: ", in.seq_id()));
  if (in.request_id() < 0) {
    return Bad(field + ".request_id", absl::StrCat("negative: ", in.request_id()));
  }
  if (in.sequence_index() < 0) {
    return Bad(field + ".sequence_index", absl::StrCat("negative: ", in.sequence_index()));
  }
  if (in.prompt_token_ids_size() == 0) return Bad(field + ".prompt_token_ids", "empty");
  if (auto s = CheckNonNegative(field + ".prompt_token_ids", in.prompt_token_ids(), "token id");
      !s.ok()) {
    return s;
  }
  if (auto s = CheckNonNegative(field + ".output_token_ids", in.output_token_ids(), "token id");
      !s.ok()) {
    return s;
  }
  if (auto s = CheckNonNegative(field + ".block_ids", in.block_ids(), "block id"); !s.ok()) {
    return s;
  }
  const int64_t len = int64_t{in.prompt_token_ids_size()} + in.output_token_ids_size();
  if (in.num_computed_tokens() < 0 || in.num_computed_tokens() > len) {
    return Bad(field + ".num_computed_tokens",
               absl::StrCat("must be in [0, ", len, "], got ", in.num_computed_tokens()));
  }
  out->seq_id = in.seq_id();
  out->request_id = in.request_id();
  out->sequence_index = in.sequence_index();
  CopyRepeated(in.prompt_token_ids(), &out->prompt_token_ids);
  CopyRepeated(in.output_token_ids(), &out->output_token_ids);
  CopyRepeated(in.block_ids(), &out->block_ids);
  out->num_computed_tokens = in.num_computed_tokens();
  if (absl::Status s = FromProto(in.sampling(), &out->sampling); !s.ok()) {
    return Bad(field + ".sampling", std::string(s.message()));
  }
  return absl::OkStatus();
}

absl::Status FromProtoCached(const v1::CachedSequence& in, const std::string& field,
                             CachedSequenceData* out) {
  if (in.seq_id() < 0) return Bad(field + ".seq_id", absl::StrCat("negative: ", in.seq_id()));
  if (in.block_table_offset() < 0) {
    return Bad(field + ".block_table_offset", absl::StrCat("negative: ", in.block_table_offset()));
  }
  if (in.num_computed_tokens() < 0) {
    return Bad(field + ".num_computed_tokens",
               absl::StrCat("negative: ", in.num_computed_tokens()));
  }
  if (auto s = CheckNonNegative(field + ".block_ids", in.block_ids(), "block id"); !s.ok()) {
    return s;
  }
  out->seq_id = in.seq_id();
  out->block_table_offset = in.block_table_offset();
  CopyRepeated(in.block_ids(), &out->block_ids);
  out->num_computed_tokens = in.num_computed_tokens();
  return absl::OkStatus();
}

absl::Status FromProtoScheduled(const v1::ScheduledSequence& in, const std::string& field,
                                ScheduledSequence* out) {
  if (in.seq_id() < 0) return Bad(field + ".seq_id", absl::StrCat("negative: ", in.seq_id()));
  if (in.start_position() < 0) {
    return Bad(field + ".start_position", absl::StrCat("negative: ", in.start_position()));
  }
  if (in.token_ids_size() == 0) return Bad(field + ".token_ids", "empty");
  if (auto s = CheckNonNegative(field + ".token_ids", in.token_ids(), "token id"); !s.ok()) {
    return s;
  }
  switch (in.sample_mode()) {
    case v1::SAMPLE_MODE_NONE:
      out->sample_mode = SampleMode::kNone;
      break;
    case v1::SAMPLE_MODE_SAMPLE:
      out->sample_mode = SampleMode::kSample;
      break;
    case v1::SAMPLE_MODE_BEAM_CANDIDATES:
      out->sample_mode = SampleMode::kBeamCandidates;
      break;
    default:
      return Bad(field + ".sample_mode", absl::StrCat("unknown value ", in.sample_mode()));
  }
  if (in.num_samples() < 0 ||
      (out->sample_mode != SampleMode::kNone && in.num_samples() < 1)) {
    return Bad(field + ".num_samples",
               absl::StrCat("must be >= 1 when sampling (>= 0 otherwise), got ", in.num_samples()));
  }
  out->seq_id = in.seq_id();
  out->start_position = in.start_position();
  out->token_ids.assign(in.token_ids().begin(), in.token_ids().end());
  out->num_samples = in.num_samples();
  out->prompt_logprobs = in.prompt_logprobs();
  return absl::OkStatus();
}

v1::SampleMode ToProtoMode(SampleMode mode) {
  switch (mode) {
    case SampleMode::kNone:
      return v1::SAMPLE_MODE_NONE;
    case SampleMode::kSample:
      return v1::SAMPLE_MODE_SAMPLE;
    case SampleMode::kBeamCandidates:
      return v1::SAMPLE_MODE_BEAM_CANDIDATES;
  }
  return v1::SAMPLE_MODE_NONE;
}

}  // namespace

void ToProto(const SamplingParams& p, v1::SequenceSamplingParams* out) {
  out->Clear();
  out->set_temperature(p.temperature);
  out->set_top_k(p.top_k);
  out->set_top_p(p.top_p);
  out->set_min_p(p.min_p);
  out->set_repetition_penalty(p.repetition_penalty);
  out->set_presence_penalty(p.presence_penalty);
  out->set_frequency_penalty(p.frequency_penalty);
  if (p.seed.has_value()) out->set_seed(*p.seed);
  out->set_logprobs(p.logprobs);
  if (p.prompt_logprobs.has_value()) out->set_prompt_logprobs(*p.prompt_logprobs);
  out->set_n(p.n);
  out->set_best_of(p.best_of);
  out->set_beam_width(p.beam_width);
  out->set_length_penalty(p.length_penalty);
  out->set_max_tokens(p.max_tokens);
  out->set_ignore_eos(p.ignore_eos);
  out->mutable_stop_token_ids()->Add(p.stop_token_ids.begin(), p.stop_token_ids.end());
  out->set_min_tokens(p.min_tokens);
  out->mutable_end_token_ids()->Add(p.end_token_ids.begin(), p.end_token_ids.end());
  for (const TokenBias& b : p.logit_bias) {
    out->add_logit_bias_tokens(b.token);
    out->add_logit_bias_values(b.bias);
  }
  out->mutable_allowed_token_ids()->Add(p.allowed_token_ids.begin(), p.allowed_token_ids.end());
  for (const std::vector<TokenId>& word : p.bad_words_token_ids) {
    out->add_bad_words()->mutable_ids()->Add(word.begin(), word.end());
  }
}

absl::Status FromProto(const v1::SequenceSamplingParams& in, SamplingParams* out) {
  out->temperature = in.temperature();
  out->top_k = in.top_k();
  out->top_p = in.top_p();
  out->min_p = in.min_p();
  out->repetition_penalty = in.repetition_penalty();
  out->presence_penalty = in.presence_penalty();
  out->frequency_penalty = in.frequency_penalty();
  if (in.has_seed()) {
    out->seed = in.seed();
  } else {
    out->seed.reset();
  }
  out->logprobs = in.logprobs();
  if (in.has_prompt_logprobs()) {
    out->prompt_logprobs = in.prompt_logprobs();
  } else {
    out->prompt_logprobs.reset();
  }
  out->n = in.n();
  out->best_of = in.best_of();
  out->beam_width = in.beam_width();
  out->length_penalty = in.length_penalty();
  out->max_tokens = in.max_tokens();
  out->ignore_eos = in.ignore_eos();
  CopyRepeated(in.stop_token_ids(), &out->stop_token_ids);
  out->min_tokens = in.min_tokens();
  CopyRepeated(in.end_token_ids(), &out->end_token_ids);
  if (in.logit_bias_tokens_size() != in.logit_bias_values_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_bias_tokens has ", in.logit_bias_tokens_size(),
                     " entries but logit_bias_values has ", in.logit_bias_values_size()));
  }
  out->logit_bias.clear();
  for (int i = 0; i < in.logit_bias_tokens_size(); ++i) {
    out->logit_bias.push_back({in.logit_bias_tokens(i), in.logit_bias_values(i)});
  }
  CopyRepeated(in.allowed_token_ids(), &out->allowed_token_ids);
  out->bad_words_token_ids.resize(static_cast<size_t>(in.bad_words_size()));
  for (int i = 0; i < in.bad_words_size(); ++i) {
    CopyRepeated(in.bad_words(i).ids(), &out->bad_words_token_ids[static_cast<size_t>(i)]);
  }
  return ValidateSamplingParams(*out);
}

void ToProto(const StepPlan& plan, v1::StepPlan* out) {
  out->Clear();
  out->set_step_id(plan.step_id);
  out->mutable_new_sequences()->Reserve(static_cast<int>(plan.new_sequences.size()));
  for (const NewSequenceData& s : plan.new_sequences) {
    v1::NewSequence* p = out->add_new_sequences();
    p->set_seq_id(s.seq_id);
    p->set_request_id(s.request_id);
    p->set_sequence_index(s.sequence_index);
    p->mutable_prompt_token_ids()->Add(s.prompt_token_ids.begin(), s.prompt_token_ids.end());
    p->mutable_output_token_ids()->Add(s.output_token_ids.begin(), s.output_token_ids.end());
    p->mutable_block_ids()->Add(s.block_ids.begin(), s.block_ids.end());
    p->set_num_computed_tokens(s.num_computed_tokens);
    ToProto(s.sampling, p->mutable_sampling());
  }
  out->mutable_cached_sequences()->Reserve(static_cast<int>(plan.cached_sequences.size()));
  for (const CachedSequenceData& s : plan.cached_sequences) {
    v1::CachedSequence* p = out->add_cached_sequences();
    p->set_seq_id(s.seq_id);
    p->set_block_table_offset(s.block_table_offset);
    p->mutable_block_ids()->Add(s.block_ids.begin(), s.block_ids.end());
    p->set_num_computed_tokens(s.num_computed_tokens);
  }
  out->mutable_scheduled()->Reserve(static_cast<int>(plan.scheduled.size()));
  for (const ScheduledSequence& s : plan.scheduled) {
    v1::ScheduledSequence* p = out->add_scheduled();
    p->set_seq_id(s.seq_id);
    p->set_start_position(s.start_position);
    p->mutable_token_ids()->Add(s.token_ids.begin(), s.token_ids.end());
    p->set_sample_mode(ToProtoMode(s.sample_mode));
    p->set_num_samples(s.num_samples);
    p->set_prompt_logprobs(s.prompt_logprobs);
  }
  ToProtoCopies(plan.swap_out, out->mutable_swap_out());
  ToProtoCopies(plan.swap_in, out->mutable_swap_in());
  ToProtoCopies(plan.copies, out->mutable_copies());
  out->mutable_finished_seq_ids()->Add(plan.finished_seq_ids.begin(), plan.finished_seq_ids.end());
  out->mutable_preempted_seq_ids()->Add(plan.preempted_seq_ids.begin(),
                                        plan.preempted_seq_ids.end());
  out->set_num_scheduled_tokens(plan.num_scheduled_tokens);
}

absl::Status FromProto(const v1::StepPlan& in, StepPlan* out) {
  out->step_id = in.step_id();
  out->new_sequences.clear();
  out->new_sequences.resize(in.new_sequences_size());
  for (int i = 0; i < in.new_sequences_size(); ++i) {
    if (auto s = FromProtoNew(in.new_sequences(i), Indexed("new_sequences", i),
                              &out->new_sequences[i]);
        !s.ok()) {
      return s;
    }
  }
  out->cached_sequences.clear();
  out->cached_sequences.resize(in.cached_sequences_size());
  for (int i = 0; i < in.cached_sequences_size(); ++i) {
    if (auto s = FromProtoCached(in.cached_sequences(i), Indexed("cached_sequences", i),
                                 &out->cached_sequences[i]);
        !s.ok()) {
      return s;
    }
  }
  out->scheduled.clear();
  out->scheduled.resize(in.scheduled_size());
  int64_t total_tokens = 0;
  for (int i = 0; i < in.scheduled_size(); ++i) {
    if (auto s = FromProtoScheduled(in.scheduled(i), Indexed("scheduled", i), &out->scheduled[i]);
        !s.ok()) {
      return s;
    }
    total_tokens += in.scheduled(i).token_ids_size();
  }
  if (in.num_scheduled_tokens() != total_tokens) {
    return Bad("num_scheduled_tokens", absl::StrCat("is ", in.num_scheduled_tokens(),
                                                    " but the scheduled sequences hold ",
                                                    total_tokens, " tokens"));
  }
  out->num_scheduled_tokens = in.num_scheduled_tokens();
  if (auto s = FromProtoCopies("swap_out", in.swap_out(), &out->swap_out); !s.ok()) return s;
  if (auto s = FromProtoCopies("swap_in", in.swap_in(), &out->swap_in); !s.ok()) return s;
  if (auto s = FromProtoCopies("copies", in.copies(), &out->copies); !s.ok()) return s;
  if (auto s = CheckNonNegative("finished_seq_ids", in.finished_seq_ids(), "sequence id");
      !s.ok()) {
    return s;
  }
  if (auto s = CheckNonNegative("preempted_seq_ids", in.preempted_seq_ids(), "sequence id");
      !s.ok()) {
    return s;
  }
  CopyRepeated(in.finished_seq_ids(), &out->finished_seq_ids);
  CopyRepeated(in.preempted_seq_ids(), &out->preempted_seq_ids);
  return absl::OkStatus();
}

namespace {

void ToProtoTokens(const std::vector<SampledToken>& tokens,
                   google::protobuf::RepeatedPtrField<v1::SampledToken>* out) {
  out->Reserve(static_cast<int>(tokens.size()));
  for (const SampledToken& t : tokens) {
    v1::SampledToken* pt = out->Add();
    pt->set_token_id(t.token_id);
    pt->set_logprob(t.logprob);
    pt->mutable_top_logprobs()->Reserve(static_cast<int>(t.top_logprobs.size()));
    for (const TokenLogprob& lp : t.top_logprobs) {
      v1::TokenProb* pl = pt->add_top_logprobs();
      pl->set_token_id(lp.token_id);
      pl->set_logprob(lp.logprob);
    }
  }
}

absl::Status FromProtoTokens(const google::protobuf::RepeatedPtrField<v1::SampledToken>& in,
                             const std::string& field, std::vector<SampledToken>* out) {
  out->resize(in.size());
  for (int j = 0; j < in.size(); ++j) {
    const v1::SampledToken& pt = in[j];
    if (pt.token_id() < 0) {
      return Bad(absl::StrCat(field, "[", j, "].token_id"),
                 absl::StrCat("negative: ", pt.token_id()));
    }
    SampledToken& t = (*out)[j];
    t.token_id = pt.token_id();
    t.logprob = pt.logprob();
    t.top_logprobs.resize(pt.top_logprobs_size());
    for (int k = 0; k < pt.top_logprobs_size(); ++k) {
      const v1::TokenProb& pl = pt.top_logprobs(k);
      if (pl.token_id() < 0) {
        return Bad(absl::StrCat(field, "[", j, "].top_logprobs[", k, "].token_id"),
                   absl::StrCat("negative: ", pl.token_id()));
      }
      t.top_logprobs[k] = {pl.token_id(), pl.logprob()};
    }
  }
  return absl::OkStatus();
}

}  // namespace

void ToProto(const StepResult& result, v1::StepResult* out) {
  out->set_step_id(result.step_id);
  out->clear_samples();
  out->mutable_samples()->Reserve(static_cast<int>(result.samples.size()));
  for (const SequenceSamples& s : result.samples) {
    v1::SequenceSamples* p = out->add_samples();
    p->set_seq_id(s.seq_id);
    ToProtoTokens(s.tokens, p->mutable_tokens());
  }
  out->clear_prompt_logprobs();
  for (const PromptLogprobs& s : result.prompt_logprobs) {
    v1::PromptLogprobs* p = out->add_prompt_logprobs();
    p->set_seq_id(s.seq_id);
    p->set_first_index(s.first_index);
    ToProtoTokens(s.tokens, p->mutable_tokens());
  }
}

absl::Status FromProto(const v1::StepResult& in, StepResult* out) {
  out->step_id = in.step_id();
  out->samples.clear();
  out->samples.resize(in.samples_size());
  for (int i = 0; i < in.samples_size(); ++i) {
    const v1::SequenceSamples& ps = in.samples(i);
    const std::string field = Indexed("samples", i);
    if (ps.seq_id() < 0) return Bad(field + ".seq_id", absl::StrCat("negative: ", ps.seq_id()));
    SequenceSamples& s = out->samples[i];
    s.seq_id = ps.seq_id();
    if (auto st = FromProtoTokens(ps.tokens(), field + ".tokens", &s.tokens); !st.ok()) return st;
  }
  out->prompt_logprobs.clear();
  out->prompt_logprobs.resize(in.prompt_logprobs_size());
  for (int i = 0; i < in.prompt_logprobs_size(); ++i) {
    const v1::PromptLogprobs& pp = in.prompt_logprobs(i);
    const std::string field = Indexed("prompt_logprobs", i);
    if (pp.seq_id() < 0) return Bad(field + ".seq_id", absl::StrCat("negative: ", pp.seq_id()));
    if (pp.first_index() < 1) {
      return Bad(field + ".first_index", absl::StrCat("must be >= 1, got ", pp.first_index()));
    }
    PromptLogprobs& p = out->prompt_logprobs[i];
    p.seq_id = pp.seq_id();
    p.first_index = pp.first_index();
    if (auto st = FromProtoTokens(pp.tokens(), field + ".tokens", &p.tokens); !st.ok()) return st;
  }
  return absl::OkStatus();
}

void ToProto(const absl::Status& status, v1::Status* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(std::string(status.message()));
}

absl::Status FromProto(const v1::Status& in) {
  if (in.code() == 0) return absl::OkStatus();
  if (in.code() < 0 || in.code() > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(absl::StrCat("status code ", in.code(), ": ", in.message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(in.code()), in.message());
}

}  // namespace folio
