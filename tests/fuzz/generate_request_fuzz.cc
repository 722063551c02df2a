// Fuzzes the scheduler's request parsing (ParseGenerateRequest,
// scheduler/server/generate_request.h), the one parser both front ends feed:
// the input is parsed as a folio.v1.GenerateRequest (what a gRPC client
// sends) and checked against the demo model (models/folio-demo: its
// tokenizer, vocabulary and max_model_len), once with first-come first-served
// limits and once with priority scheduling and generation_config defaults.
// Checks: no crash, UB, hang or exception; refusals are INVALID_ARGUMENT; an
// accepted request keeps every promise of CheckParsedRequest (demo_model.h):
// prompt non-empty, in the vocabulary and within max_model_len, sampling
// parameters valid, every token id it names in the vocabulary.

#include <cstdint>

#include "folio/v1/generation.pb.h"
#include "google/protobuf/stubs/logging.h"
#include "scheduler/server/generate_request.h"
#include "tests/fuzz/demo_model.h"

// Protobuf logs every string field with invalid UTF-8 it refuses: quiet.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  folio::v1::GenerateRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  const folio::fuzz::DemoModel& demo = folio::fuzz::Demo();
  for (const folio::RequestLimits* limits : {&demo.limits, &demo.limits_with_defaults}) {
    absl::StatusOr<folio::ParsedRequest> parsed =
        folio::ParseGenerateRequest(request, *demo.tokenizer, *limits);
    if (!parsed.ok()) {
      FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
                 parsed.status().ToString().c_str());
      continue;
    }
    folio::fuzz::CheckParsedRequest(*parsed, *limits);
  }
  return 0;
}
