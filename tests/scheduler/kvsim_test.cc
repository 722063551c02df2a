// folio-kvsim's library (scheduler/kvsim/): trace files, and replays that
// serve every request of a trace under every reservation policy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "scheduler/kvsim/memory_accounting.h"
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

// --kv-cache-dtype: the same bytes hold ~4x the float32 tokens in int8 or
// fp8 (one-byte codes; a float32 scale per KV head and block, each layer's
// K or V block padded to 64 bytes), 2x in float16.
TEST(KvsimMemoryTest, QuantizedCachesHoldAboutFourTimesTheFloat32Tokens) {
  using kernels::CacheDtype;
  for (const KvModelShape shape : {KvModelShape{}, KvModelShape{4, 2, 32}, KvModelShape{32, 8, 128}}) {
    SCOPED_TRACE(testing::Message() << shape.num_layers << " layers, " << shape.num_kv_heads
                                    << " KV heads of " << shape.head_dim);
    const int32_t bs = 16;
    const int64_t bytes = int64_t{12} << 30;
    const int64_t elems = int64_t{shape.num_kv_heads} * bs * shape.head_dim;  // per layer, K or V
    const int64_t fp32_block = 2 * shape.num_layers * elems * 4;
    const int64_t quant_block =
        2 * shape.num_layers * ((elems + 4 * shape.num_kv_heads + 63) / 64 * 64);
    EXPECT_EQ(KvBlockBytes(shape, bs, CacheDtype::kFloat32), fp32_block);
    EXPECT_EQ(KvBlockBytes(shape, bs, CacheDtype::kFloat16), fp32_block / 2);
    EXPECT_EQ(KvBlockBytes(shape, bs, CacheDtype::kInt8), quant_block);
    EXPECT_EQ(KvBlockBytes(shape, bs, CacheDtype::kFp8E4m3), quant_block);

    const int64_t fp32_slots = TokenSlotsInBytes(bytes, shape, bs, CacheDtype::kFloat32);
    const int64_t int8_slots = TokenSlotsInBytes(bytes, shape, bs, CacheDtype::kInt8);
    EXPECT_EQ(fp32_slots, bytes / fp32_block * bs);
    EXPECT_EQ(int8_slots, bytes / quant_block * bs);
    EXPECT_EQ(TokenSlotsInBytes(bytes, shape, bs, CacheDtype::kFp8E4m3), int8_slots);
    EXPECT_EQ(TokenSlotsInBytes(bytes, shape, bs, CacheDtype::kBFloat16),
              bytes / (fp32_block / 2) * bs);
    // The scales cost 4 bytes per head of block_size * head_dim codes, plus
    // the padding: int8 holds just under 4x the tokens (whole blocks of each).
    const double ratio = static_cast<double>(int8_slots) / static_cast<double>(fp32_slots);
    EXPECT_LT(ratio, 4.0);
    EXPECT_NEAR(ratio, static_cast<double>(fp32_block) / static_cast<double>(quant_block), 0.01);
    // Heads of 128 or more dimensions: the scales are under 1%.
    if (shape.head_dim >= 128) {
      EXPECT_GT(ratio, 3.95);
    }
  }
  // Less than a block holds nothing.
  EXPECT_EQ(TokenSlotsInBytes(1 << 20, KvModelShape{}, 16, kernels::CacheDtype::kFloat32), 0);
}

TEST(KvsimMemoryTest, CacheDtypeNames) {
  using kernels::CacheDtype;
  const std::pair<const char*, CacheDtype> accepted[] = {
      {"auto", CacheDtype::kFloat16},     {"", CacheDtype::kFloat16},
      {"float16", CacheDtype::kFloat16},  {"float32", CacheDtype::kFloat32},
      {"bfloat16", CacheDtype::kBFloat16}, {"int8", CacheDtype::kInt8},
      {"fp8", CacheDtype::kFp8E4m3},      {"fp8_e4m3", CacheDtype::kFp8E4m3},
  };
  for (const auto& [name, dtype] : accepted) {
    absl::StatusOr<CacheDtype> d = ParseKvsimCacheDtype(name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status();
    EXPECT_EQ(*d, dtype) << name;
  }
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kInt8), "int8");
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kFp8E4m3), "fp8_e4m3");
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kFloat16), "float16");
  absl::StatusOr<CacheDtype> bad = ParseKvsimCacheDtype("fp8_e5m2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--kv-cache-dtype 'fp8_e5m2'"));
}

}  // namespace
}  // namespace folio::kvsim
