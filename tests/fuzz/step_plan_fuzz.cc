// Fuzzes the worker's side of the plan protocol (common/plan_proto.h,
// common/plan_mirror.h): the input is parsed as a folio.v1.StepPlan (the
// bytes a worker's Step stream receives), converted with FromProto and, when
// valid, applied to a fresh PlanMirror as a worker does (ApplyMetadata, then
// ApplyScheduled per scheduled sequence). The same bytes are also read as a
// folio.v1.StepResult (what the scheduler receives back) and its Status.
// Checks: no crash, UB or exception; FromProto refuses with INVALID_ARGUMENT
// naming a field; an accepted plan has non-negative ids and
// num_scheduled_tokens equal to its tokens, and survives ToProto ->
// FromProto -> ToProto unchanged; a mirrored sequence the mirror accepts
// holds its tokens in blocks inside the pool.

#include <cstdint>
#include <string>

#include "common/plan_mirror.h"
#include "common/plan_proto.h"
#include "folio/v1/worker.pb.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumDeviceBlocks = 64;

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream sos(&out);
  google::protobuf::io::CodedOutputStream cos(&sos);
  cos.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&cos);
  cos.Trim();
  return out;
}

void FuzzPlan(const uint8_t* data, size_t size) {
  folio::v1::StepPlan proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  folio::StepPlan plan;
  absl::Status s = folio::FromProto(proto, &plan);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
               s.ToString().c_str());
    FUZZ_CHECK(!s.message().empty(), "error without a message");
    return;
  }
  int64_t tokens = 0;
  for (const folio::ScheduledSequence& w : plan.scheduled) {
    FUZZ_CHECK(w.seq_id >= 0 && w.start_position >= 0 && !w.token_ids.empty(), "bad scheduled entry");
    for (folio::TokenId t : w.token_ids) FUZZ_CHECK(t >= 0, "negative token id");
    tokens += static_cast<int64_t>(w.token_ids.size());
  }
  FUZZ_CHECK(tokens == plan.num_scheduled_tokens, "num_scheduled_tokens %d but %lld tokens",
             plan.num_scheduled_tokens, static_cast<long long>(tokens));
  for (const folio::NewSequenceData& n : plan.new_sequences) {
    FUZZ_CHECK(n.seq_id >= 0 && !n.prompt_token_ids.empty(), "bad new sequence");
    for (folio::BlockId b : n.block_ids) FUZZ_CHECK(b >= 0, "negative block id");
    FUZZ_CHECK(folio::ValidateSamplingParams(n.sampling).ok(), "invalid sampling params accepted");
  }

  // The conversion is lossless on what it accepts.
  folio::v1::StepPlan again;
  folio::ToProto(plan, &again);
  folio::StepPlan plan2;
  absl::Status s2 = folio::FromProto(again, &plan2);
  FUZZ_CHECK(s2.ok(), "ToProto of an accepted plan is refused: %s", s2.ToString().c_str());
  folio::v1::StepPlan again2;
  folio::ToProto(plan2, &again2);
  FUZZ_CHECK(Deterministic(again) == Deterministic(again2), "ToProto/FromProto is not a round trip");

  // What a worker does with it next.
  folio::PlanMirror mirror(kBlockSize, kNumDeviceBlocks);
  if (!mirror.ApplyMetadata(plan).ok()) return;
  for (const folio::ScheduledSequence& w : plan.scheduled) {
    absl::StatusOr<folio::MirroredSequence*> m = mirror.ApplyScheduled(w);
    if (!m.ok()) continue;
    const int64_t end = int64_t{w.start_position} + static_cast<int64_t>(w.token_ids.size());
    FUZZ_CHECK(static_cast<int64_t>((*m)->tokens.size()) >= end, "mirror lost tokens");
    FUZZ_CHECK(static_cast<int64_t>((*m)->blocks.size()) * kBlockSize >= end, "blocks cannot hold tokens");
    for (int64_t i = 0; i * kBlockSize < end; ++i) {
      const folio::BlockId b = (*m)->blocks[static_cast<size_t>(i)];
      FUZZ_CHECK(b >= 0 && b < kNumDeviceBlocks, "block %d outside the pool", b);
    }
  }
}

void FuzzResult(const uint8_t* data, size_t size) {
  folio::v1::StepResult proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return;
  folio::StepResult result;
  absl::Status s = folio::FromProto(proto, &result);
  if (s.ok()) {
    for (const folio::SequenceSamples& ss : result.samples) {
      FUZZ_CHECK(ss.seq_id >= 0, "negative seq id");
      for (const folio::SampledToken& t : ss.tokens) FUZZ_CHECK(t.token_id >= 0, "negative token id");
    }
    for (const folio::PromptLogprobs& p : result.prompt_logprobs) {
      FUZZ_CHECK(p.first_index >= 1, "first_index %d", p.first_index);
    }
  } else {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s", s.ToString().c_str());
  }
  absl::Status status = folio::FromProto(proto.status());
  FUZZ_CHECK(status.ok() == (proto.status().code() == 0), "status code %d read as %s",
             proto.status().code(), status.ToString().c_str());
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it refuses: quiet.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzPlan(data, size);
  FuzzResult(data, size);
  return 0;
}
