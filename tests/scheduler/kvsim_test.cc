// folio-kvsim's library (scheduler/kvsim/): trace files, and replays that
// serve every request of a trace under every reservation policy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "scheduler/kvsim/simulation.h"
#include "scheduler/kvsim/trace.h"

namespace folio::kvsim {
namespace {

using ::testing::HasSubstr;

std::string WriteTrace(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string LoadError(const std::string& text) {
  absl::StatusOr<Trace> t = LoadTraceFile(WriteTrace("bad.jsonl", text), 2048);
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : std::string(t.status().message());
}

TEST(KvsimTraceTest, ErrorsNameTheLineAndTheField) {
  EXPECT_THAT(LoadError("{\"prompt_len\": 3, \"output_len\": 4}\n{\"prompt_len\": 3}\n"),
              HasSubstr("bad.jsonl:2: missing output_len"));
  EXPECT_THAT(LoadError("{\"prompt_len\": 2.5, \"output_len\": 4}\n"),
              HasSubstr("prompt_len must be an integer"));
  EXPECT_THAT(LoadError("{\"prompt_len\": 99999999999999999999, \"output_len\": 4}\n"),
              HasSubstr("prompt_len must be in [1, 2048], got"));
  EXPECT_THAT(LoadError("{\"prompt_len\": 2000, \"output_len\": 49}\n"),
              HasSubstr("exceeds max_model_len 2048"));
  EXPECT_THAT(LoadError("not json\n"), HasSubstr("bad.jsonl:1: not a JSON object"));
  const std::string dir = ::testing::TempDir() + "/dir.jsonl";
  std::filesystem::create_directories(dir);
  absl::StatusOr<Trace> t = LoadTraceFile(dir, 2048);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("is a directory"));
}

TEST(KvsimTraceTest, BlankLinesAreSkipped) {
  absl::StatusOr<Trace> t = LoadTraceFile(
      WriteTrace("ok.jsonl", "\n{\"prompt_len\": 3, \"output_len\": 4}\r\n  \n"
                             "{\"prompt_len\": 5, \"output_len\": 1, \"extra\": true}"),
      2048);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->requests.size(), 2u);
  EXPECT_EQ(t->requests[1].prompt_len, 5);
}

// A request of max_model_len tokens in a pool of exactly that many slots is
// served under every policy: the simulator keeps no admission watermark (it
// used to drop this one under paging, silently).
TEST(KvsimSimulationTest, ARequestFillingThePoolIsServedByEveryPolicy) {
  Trace trace;
  trace.requests = {{2032, 16}, {1, 2047}, {7, 9}};
  SimulationOptions o;
  o.token_slots = 2048;
  o.max_model_len = 2048;
  for (ReservationPolicy policy : {ReservationPolicy::kNone, ReservationPolicy::kMax,
                                   ReservationPolicy::kPow2, ReservationPolicy::kOracle}) {
    SCOPED_TRACE(ReservationPolicyName(policy));
    absl::StatusOr<SimulationResult> r = Simulate(trace, o, policy, SamplingParams{});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->failed_requests, 0) << r->first_error;
    EXPECT_EQ(r->generated_tokens, 16 + 2047 + 9);
  }
}

}  // namespace
}  // namespace folio::kvsim
