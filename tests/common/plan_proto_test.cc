// Round trips of the plan types through their wire form, field by field, and
// the validation errors FromProto returns for malformed plans.

#include "common/plan_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/util/message_differencer.h"

namespace folio {
namespace {

using ::testing::HasSubstr;

SamplingParams FullParams() {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 40;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = -0.25f;
  p.seed = uint64_t{0xFFFFFFFFFFFFFFF0ull};
  p.logprobs = 5;
  p.n = 2;
  p.best_of = 3;
  p.beam_width = 1;
  p.length_penalty = 0.8f;
  p.max_tokens = 77;
  p.ignore_eos = true;
  p.stop_token_ids = {2, 13, 99};
  p.min_tokens = 5;
  p.end_token_ids = {1, 2, 13, 99};
  p.logit_bias = {{3, -100.0f}, {40, 0.25f}};
  p.prompt_logprobs = 4;
  p.allowed_token_ids = {3, 40, 41, 900};
  p.bad_words_token_ids = {{5}, {6, 7, 8}};
  return p;
}

void ExpectSameParams(const SamplingParams& a, const SamplingParams& b) {
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.top_p, b.top_p);
  EXPECT_EQ(a.min_p, b.min_p);
  EXPECT_EQ(a.repetition_penalty, b.repetition_penalty);
  EXPECT_EQ(a.presence_penalty, b.presence_penalty);
  EXPECT_EQ(a.frequency_penalty, b.frequency_penalty);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.logprobs, b.logprobs);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.best_of, b.best_of);
  EXPECT_EQ(a.beam_width, b.beam_width);
  EXPECT_EQ(a.length_penalty, b.length_penalty);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.ignore_eos, b.ignore_eos);
  EXPECT_EQ(a.stop_token_ids, b.stop_token_ids);
  EXPECT_EQ(a.min_tokens, b.min_tokens);
  EXPECT_EQ(a.end_token_ids, b.end_token_ids);
  EXPECT_EQ(a.logit_bias, b.logit_bias);
  EXPECT_EQ(a.prompt_logprobs, b.prompt_logprobs);
  EXPECT_EQ(a.allowed_token_ids, b.allowed_token_ids);
  EXPECT_EQ(a.bad_words_token_ids, b.bad_words_token_ids);
}

StepPlan FullPlan() {
  StepPlan plan;
  plan.step_id = 123456789012ull;
  NewSequenceData n;
  n.seq_id = 7;
  n.request_id = 3;
  n.sequence_index = 1;
  n.prompt_token_ids = {1, 2, 3, 4, 5};
  n.output_token_ids = {6, 7};
  n.block_ids = {10, 11};
  n.num_computed_tokens = 4;
  n.sampling = FullParams();
  plan.new_sequences.push_back(n);
  NewSequenceData n2 = n;
  n2.seq_id = 8;
  n2.sampling = SamplingParams{};  // no seed
  n2.output_token_ids.clear();
  plan.new_sequences.push_back(n2);
  plan.cached_sequences.push_back({5, 2, {20, 21}, 33});
  plan.cached_sequences.push_back({6, 0, {}, 0});
  ScheduledSequence s1{7, 4, {5, 6, 7}, SampleMode::kSample, /*prompt_logprobs=*/false, 3};
  ScheduledSequence s2{5, 33, {42}, SampleMode::kBeamCandidates, /*prompt_logprobs=*/false, 8};
  ScheduledSequence s3{8, 0, {1, 2}, SampleMode::kNone, /*prompt_logprobs=*/true, 0};
  plan.scheduled = {s1, s2, s3};
  plan.swap_out = {{1, 2}, {3, 4}};
  plan.swap_in = {{5, 6}};
  plan.copies = {{7, 8}};
  plan.finished_seq_ids = {100, 101};
  plan.preempted_seq_ids = {102};
  plan.num_scheduled_tokens = 6;
  return plan;
}

void ExpectSamePlan(const StepPlan& a, const StepPlan& b) {
  EXPECT_EQ(a.step_id, b.step_id);
  ASSERT_EQ(a.new_sequences.size(), b.new_sequences.size());
  for (size_t i = 0; i < a.new_sequences.size(); ++i) {
    const NewSequenceData& x = a.new_sequences[i];
    const NewSequenceData& y = b.new_sequences[i];
    EXPECT_EQ(x.seq_id, y.seq_id);
    EXPECT_EQ(x.request_id, y.request_id);
    EXPECT_EQ(x.sequence_index, y.sequence_index);
    EXPECT_EQ(x.prompt_token_ids, y.prompt_token_ids);
    EXPECT_EQ(x.output_token_ids, y.output_token_ids);
    EXPECT_EQ(x.block_ids, y.block_ids);
    EXPECT_EQ(x.num_computed_tokens, y.num_computed_tokens);
    ExpectSameParams(x.sampling, y.sampling);
  }
  ASSERT_EQ(a.cached_sequences.size(), b.cached_sequences.size());
  for (size_t i = 0; i < a.cached_sequences.size(); ++i) {
    EXPECT_EQ(a.cached_sequences[i].seq_id, b.cached_sequences[i].seq_id);
    EXPECT_EQ(a.cached_sequences[i].block_table_offset, b.cached_sequences[i].block_table_offset);
    EXPECT_EQ(a.cached_sequences[i].block_ids, b.cached_sequences[i].block_ids);
    EXPECT_EQ(a.cached_sequences[i].num_computed_tokens,
              b.cached_sequences[i].num_computed_tokens);
  }
  ASSERT_EQ(a.scheduled.size(), b.scheduled.size());
  for (size_t i = 0; i < a.scheduled.size(); ++i) {
    EXPECT_EQ(a.scheduled[i].seq_id, b.scheduled[i].seq_id);
    EXPECT_EQ(a.scheduled[i].start_position, b.scheduled[i].start_position);
    EXPECT_EQ(a.scheduled[i].token_ids, b.scheduled[i].token_ids);
    EXPECT_EQ(a.scheduled[i].sample_mode, b.scheduled[i].sample_mode);
    EXPECT_EQ(a.scheduled[i].num_samples, b.scheduled[i].num_samples);
    EXPECT_EQ(a.scheduled[i].prompt_logprobs, b.scheduled[i].prompt_logprobs);
  }
  EXPECT_EQ(a.swap_out, b.swap_out);
  EXPECT_EQ(a.swap_in, b.swap_in);
  EXPECT_EQ(a.copies, b.copies);
  EXPECT_EQ(a.finished_seq_ids, b.finished_seq_ids);
  EXPECT_EQ(a.preempted_seq_ids, b.preempted_seq_ids);
  EXPECT_EQ(a.num_scheduled_tokens, b.num_scheduled_tokens);
}

TEST(PlanProtoTest, SamplingParamsRoundTripEveryField) {
  const SamplingParams p = FullParams();
  v1::SequenceSamplingParams proto;
  ToProto(p, &proto);
  EXPECT_TRUE(proto.has_seed());
  SamplingParams back;
  ASSERT_TRUE(FromProto(proto, &back).ok());
  ExpectSameParams(p, back);
}

TEST(PlanProtoTest, SeedStaysUnsetWhenAbsent) {
  SamplingParams p;
  v1::SequenceSamplingParams proto;
  ToProto(p, &proto);
  EXPECT_FALSE(proto.has_seed());
  SamplingParams back;
  back.seed = 5;  // overwritten
  ASSERT_TRUE(FromProto(proto, &back).ok());
  EXPECT_FALSE(back.seed.has_value());
  // Seed 0 is a seed, not "unset".
  p.seed = 0;
  ToProto(p, &proto);
  EXPECT_TRUE(proto.has_seed());
  ASSERT_TRUE(FromProto(proto, &back).ok());
  EXPECT_EQ(back.seed, std::optional<uint64_t>(0));
}

TEST(PlanProtoTest, StepPlanRoundTripEveryField) {
  const StepPlan plan = FullPlan();
  v1::StepPlan proto;
  ToProto(plan, &proto);
  StepPlan back;
  ASSERT_TRUE(FromProto(proto, &back).ok());
  ExpectSamePlan(plan, back);
  // Through the bytes as well, and the second encoding is identical.
  std::string bytes;
  ASSERT_TRUE(proto.SerializeToString(&bytes));
  v1::StepPlan parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  StepPlan back2;
  ASSERT_TRUE(FromProto(parsed, &back2).ok());
  ExpectSamePlan(plan, back2);
  v1::StepPlan again;
  ToProto(back2, &again);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(proto, again));
}

TEST(PlanProtoTest, FromProtoOverwritesPreviousContents) {
  StepPlan stale = FullPlan();
  v1::StepPlan empty;
  ASSERT_TRUE(FromProto(empty, &stale).ok());
  EXPECT_TRUE(stale.empty());
  EXPECT_TRUE(stale.new_sequences.empty());
  EXPECT_TRUE(stale.cached_sequences.empty());
  EXPECT_EQ(stale.step_id, 0u);
}

TEST(PlanProtoTest, StepResultRoundTripWithTopLogprobs) {
  StepResult r;
  r.step_id = 99;
  SequenceSamples s;
  s.seq_id = 4;
  s.tokens.push_back({17, -0.5f, {{17, -0.5f}, {3, -1.25f}, {9, -4.0f}}});
  s.tokens.push_back({3, -1.25f, {}});
  r.samples.push_back(s);
  r.samples.push_back({5, {{8, -0.01f, {{8, -0.01f}}}}});
  r.prompt_logprobs.push_back({6, 3, {{12, -2.5f, {{1, -0.1f}}}, {13, -0.75f, {}}}});
  v1::StepResult proto;
  ToProto(r, &proto);
  EXPECT_EQ(proto.step_id(), 99u);
  StepResult back;
  ASSERT_TRUE(FromProto(proto, &back).ok());
  EXPECT_EQ(back.step_id, r.step_id);
  ASSERT_EQ(back.samples.size(), r.samples.size());
  for (size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_EQ(back.samples[i].seq_id, r.samples[i].seq_id);
    ASSERT_EQ(back.samples[i].tokens.size(), r.samples[i].tokens.size());
    for (size_t j = 0; j < r.samples[i].tokens.size(); ++j) {
      const SampledToken& x = r.samples[i].tokens[j];
      const SampledToken& y = back.samples[i].tokens[j];
      EXPECT_EQ(x.token_id, y.token_id);
      EXPECT_EQ(x.logprob, y.logprob);
      ASSERT_EQ(x.top_logprobs.size(), y.top_logprobs.size());
      for (size_t k = 0; k < x.top_logprobs.size(); ++k) {
        EXPECT_EQ(x.top_logprobs[k].token_id, y.top_logprobs[k].token_id);
        EXPECT_EQ(x.top_logprobs[k].logprob, y.top_logprobs[k].logprob);
      }
    }
  }
  ASSERT_EQ(back.prompt_logprobs.size(), 1u);
  EXPECT_EQ(back.prompt_logprobs[0].seq_id, 6);
  EXPECT_EQ(back.prompt_logprobs[0].first_index, 3);
  ASSERT_EQ(back.prompt_logprobs[0].tokens.size(), 2u);
  EXPECT_EQ(back.prompt_logprobs[0].tokens[0].token_id, 12);
  EXPECT_EQ(back.prompt_logprobs[0].tokens[0].logprob, -2.5f);
  ASSERT_EQ(back.prompt_logprobs[0].tokens[0].top_logprobs.size(), 1u);
  EXPECT_EQ(back.prompt_logprobs[0].tokens[0].top_logprobs[0].token_id, 1);
  EXPECT_EQ(back.prompt_logprobs[0].tokens[1].token_id, 13);
}

TEST(PlanProtoTest, StatusRoundTrip) {
  v1::Status p;
  ToProto(absl::OkStatus(), &p);
  EXPECT_EQ(p.code(), 0);
  EXPECT_TRUE(FromProto(p).ok());
  ToProto(absl::ResourceExhaustedError("no blocks"), &p);
  const absl::Status s = FromProto(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "no blocks");
  p.set_code(999);
  EXPECT_EQ(FromProto(p).code(), absl::StatusCode::kUnknown);
}

// Applies `mutate` to a valid plan's proto; FromProto must fail with
// INVALID_ARGUMENT whose message contains `field`.
void ExpectInvalid(const std::function<void(v1::StepPlan&)>& mutate, const std::string& field) {
  v1::StepPlan proto;
  ToProto(FullPlan(), &proto);
  mutate(proto);
  StepPlan out;
  const absl::Status s = FromProto(proto, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(std::string(s.message()), HasSubstr(field));
}

TEST(PlanProtoTest, ValidationNamesTheField) {
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_new_sequences(0)->set_seq_id(-1); },
                "new_sequences[0].seq_id");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_new_sequences(1)->clear_prompt_token_ids(); },
                "new_sequences[1].prompt_token_ids");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_new_sequences(0)->set_prompt_token_ids(2, -5); },
                "new_sequences[0].prompt_token_ids[2]");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_new_sequences(0)->set_block_ids(1, -2); },
                "new_sequences[0].block_ids[1]");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_new_sequences(0)->set_num_computed_tokens(8); },
                "new_sequences[0].num_computed_tokens");
  ExpectInvalid(
      [](v1::StepPlan& p) { p.mutable_new_sequences(0)->mutable_sampling()->set_top_p(0.0f); },
      "new_sequences[0].sampling");
  ExpectInvalid(
      [](v1::StepPlan& p) { p.mutable_new_sequences(0)->mutable_sampling()->set_max_tokens(0); },
      "max_tokens");
  ExpectInvalid(
      [](v1::StepPlan& p) { p.mutable_new_sequences(0)->mutable_sampling()->add_logit_bias_tokens(7); },
      "logit_bias_tokens has 3 entries but logit_bias_values has 2");
  ExpectInvalid(
      [](v1::StepPlan& p) { p.mutable_new_sequences(0)->mutable_sampling()->set_min_tokens(-1); },
      "min_tokens");
  ExpectInvalid([](v1::StepPlan& p) {
    v1::SequenceSamplingParams* s = p.mutable_new_sequences(0)->mutable_sampling();
    s->add_logit_bias_tokens(9);
    s->add_logit_bias_values(1.0f);
    s->add_logit_bias_tokens(9);
    s->add_logit_bias_values(2.0f);
  }, "ascending and distinct");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_cached_sequences(1)->set_block_table_offset(-1); },
                "cached_sequences[1].block_table_offset");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_cached_sequences(0)->set_block_ids(0, -1); },
                "cached_sequences[0].block_ids[0]");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_scheduled(1)->set_start_position(-3); },
                "scheduled[1].start_position");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_scheduled(2)->set_token_ids(0, -1); },
                "scheduled[2].token_ids[0]");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_scheduled(0)->set_num_samples(0); },
                "scheduled[0].num_samples");
  ExpectInvalid(
      [](v1::StepPlan& p) { p.mutable_scheduled(0)->set_sample_mode(static_cast<v1::SampleMode>(7)); },
      "scheduled[0].sample_mode");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_scheduled(0)->clear_token_ids(); },
                "scheduled[0].token_ids");
  ExpectInvalid([](v1::StepPlan& p) { p.set_num_scheduled_tokens(5); }, "num_scheduled_tokens");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_swap_out(1)->set_dst(-1); }, "swap_out[1]");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_swap_in(0)->set_src(-1); }, "swap_in[0]");
  ExpectInvalid([](v1::StepPlan& p) { p.mutable_copies(0)->set_src(-1); }, "copies[0]");
  ExpectInvalid([](v1::StepPlan& p) { p.set_finished_seq_ids(1, -1); }, "finished_seq_ids[1]");
  ExpectInvalid([](v1::StepPlan& p) { p.set_preempted_seq_ids(0, -1); }, "preempted_seq_ids[0]");
}

TEST(PlanProtoTest, ResultValidation) {
  v1::StepResult p;
  auto* s = p.add_samples();
  s->set_seq_id(1);
  s->add_tokens()->set_token_id(-1);
  StepResult out;
  absl::Status st = FromProto(p, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("samples[0].tokens[0].token_id"));
  s->mutable_tokens(0)->set_token_id(3);
  s->mutable_tokens(0)->add_top_logprobs()->set_token_id(-2);
  st = FromProto(p, &out);
  EXPECT_THAT(std::string(st.message()), HasSubstr("samples[0].tokens[0].top_logprobs[0]"));
  s->mutable_tokens(0)->clear_top_logprobs();
  auto* scored = p.add_prompt_logprobs();
  scored->set_seq_id(1);
  scored->set_first_index(0);
  st = FromProto(p, &out);
  EXPECT_THAT(std::string(st.message()), HasSubstr("prompt_logprobs[0].first_index"));
  scored->set_first_index(1);
  scored->add_tokens()->set_token_id(-4);
  st = FromProto(p, &out);
  EXPECT_THAT(std::string(st.message()), HasSubstr("prompt_logprobs[0].tokens[0].token_id"));
  scored->mutable_tokens(0)->set_token_id(4);
  EXPECT_TRUE(FromProto(p, &out).ok());
}

}  // namespace
}  // namespace folio
