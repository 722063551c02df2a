// folio-scheduler's settings: the flags parse into SchedulerSettings (from the
// command line and FOLIO_* variables), and CheckSchedulerSettings refuses a
// bad value or combination with an error naming the flag.

#include "scheduler/server/scheduler_settings.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace folio {
namespace {

// The settings these flags give; `check` gets CheckSchedulerSettings' verdict.
absl::StatusOr<SchedulerSettings> Parse(std::vector<std::string> args,
                                        absl::Status* check = nullptr) {
  SchedulerSettings s;
  FlagSet flags;
  DefineSchedulerFlags(flags, s);
  args.insert(args.begin(), "folio-scheduler");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  if (absl::Status st = flags.Parse(static_cast<int>(argv.size()), argv.data()); !st.ok()) return st;
  if (check != nullptr) *check = CheckSchedulerSettings(s, flags);
  return s;
}

// The error CheckSchedulerSettings gives for these flags ("" when it accepts them).
std::string Refusal(std::vector<std::string> args) {
  absl::Status st;
  absl::StatusOr<SchedulerSettings> s = Parse(std::move(args), &st);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return "parse failed";
  if (!st.ok()) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  }
  return std::string(st.message());
}

TEST(SchedulerSettingsTest, DefaultsAreAccepted) {
  EXPECT_EQ(Refusal({"--model", "m"}), "");
  absl::StatusOr<SchedulerSettings> s = Parse({"--model", "m"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->port, 50051);
  EXPECT_EQ(s->http_port, 8000);
  EXPECT_EQ(s->on_worker_failure, "requeue");
  EXPECT_EQ(s->kv_cache_dtype, "auto");
  EXPECT_TRUE(s->enable_prefix_caching);
  // The host tier is on by default, and without host blocks that is no error:
  // it is off then (KvCacheManager::Options::host_tier_enabled).
  EXPECT_TRUE(s->host_prefix_cache);
  EXPECT_EQ(s->host_prefix_cache_step_mb, -1);
  EXPECT_EQ(s->stream_interval, 1);  // every step's tokens at once
  EXPECT_EQ(Refusal({"--model", "m", "--no-enable-prefix-caching"}), "");
}

TEST(SchedulerSettingsTest, TheStepBudgetInBlocks) {
  EXPECT_EQ(HostTierBlocksPerStep(-1, 1 << 20), -1);  // the token budget's
  EXPECT_EQ(HostTierBlocksPerStep(0, 1 << 20), 0);    // no bound
  EXPECT_EQ(HostTierBlocksPerStep(64, 1 << 20), 64);
  EXPECT_EQ(HostTierBlocksPerStep(1, 3 << 20), 1);  // at least one block
  EXPECT_EQ(HostTierBlocksPerStep(1, 16 << 10), 64);
}

TEST(SchedulerSettingsTest, FlagsAndEnvironmentFillTheSettings) {
  setenv("FOLIO_MAX_NUM_SEQS", "17", 1);
  setenv("FOLIO_KV_CACHE_DTYPE", "int8", 1);
  absl::StatusOr<SchedulerSettings> s =
      Parse({"--model=dir", "--swap-space-mb", "64", "--host-prefix-cache", "--tls-cert", "c",
             "--stream-interval", "8"});
  unsetenv("FOLIO_MAX_NUM_SEQS");
  unsetenv("FOLIO_KV_CACHE_DTYPE");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model, "dir");
  EXPECT_EQ(s->max_num_seqs, 17);
  EXPECT_EQ(s->kv_cache_dtype, "int8");
  EXPECT_EQ(s->swap_space_mb, 64);
  EXPECT_TRUE(s->host_prefix_cache);
  EXPECT_EQ(s->tls.cert, "c");
  EXPECT_EQ(s->stream_interval, 8);
}

TEST(SchedulerSettingsTest, BadValuesAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"--gpu-memory-utilization", "1.5"}, "--gpu-memory-utilization"},
      {{"--gpu-memory-utilization", "0"}, "--gpu-memory-utilization"},
      {{"--kv-cache-mb", "-2"}, "--kv-cache-mb"},
      {{"--http-port", "70000"}, "--http-port"},
      {{"--health-port", "50051"}, "--health-port must differ from --port"},
      {{"--health-port", "9000", "--rendezvous-port", "9000"}, "--health-port"},
      {{"--http-port", "9001", "--health-port", "9001"}, "--http-port"},
      {{"--http-threads", "0"}, "--http-threads"},
      {{"--http-idle-timeout-s", "0"}, "--http-idle-timeout-s"},
      {{"--host-prefix-cache"}, "--swap-space-mb"},
      {{"--host-prefix-cache", "--swap-space-mb", "8", "--num-host-blocks", "0"}, "--swap-space-mb"},
      {{"--host-prefix-cache", "--swap-space-mb", "8", "--no-enable-prefix-caching"},
       "--enable-prefix-caching"},
      {{"--on-worker-failure", "retry"}, "--on-worker-failure 'retry'"},
      {{"--max-requeues", "-1"}, "--max-requeues"},
      {{"--step-timeout-min-s", "20", "--step-timeout-s", "10"}, "--step-timeout-min-s"},
      {{"--drain-timeout-s", "-1"}, "--drain-timeout-s"},
      {{"--health-check-interval-s", "-1"}, "--health-check-interval-s"},
      {{"--max-waiting-requests", "-1"}, "--max-waiting-requests"},
      {{"--max-waiting-tokens", "-5"}, "--max-waiting-tokens"},
      {{"--stream-interval", "0"}, "--stream-interval must be in [1, 1024], got 0"},
      {{"--stream-interval", "1025"}, "--stream-interval must be in [1, 1024], got 1025"},
      {{"--host-prefix-cache-step-mb", "-2"}, "--host-prefix-cache-step-mb"},
      {{"--kv-cache-dtype", "fp16"}, "--kv-cache-dtype 'fp16': expected auto, fp8"},
      {{"--device", "cuda", "--kv-cache-dtype", "int8"},
       "--kv-cache-dtype int8: a quantized KV cache runs on the cpu worker only"},
      {{"--device", "cuda:1", "--kv-cache-dtype", "fp8"}, "--kv-cache-dtype fp8"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--model", "m"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const std::string refusal = Refusal(args);
    EXPECT_NE(refusal.find(c.names), std::string::npos)
        << "flags " << testing::PrintToString(c.args) << " gave: '" << refusal << "'";
  }
}

TEST(SchedulerSettingsTest, ParsersNameTheFlagAndItsChoices) {
  EXPECT_EQ(*ParseDType("", false), v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(*ParseDType("bf16", true), v1::DTYPE_BFLOAT16);
  EXPECT_NE(ParseDType("float16", false).status().message().find("--dtype float16"),
            std::string::npos);
  EXPECT_TRUE(ParseDType("float16", true).status().message().find("expected auto") !=
              std::string::npos);
  EXPECT_TRUE(CheckQuantization("", true).ok());
  EXPECT_TRUE(CheckQuantization("int8", false).ok());
  EXPECT_FALSE(CheckQuantization("int8", true).ok());
  EXPECT_NE(CheckQuantization("int4", false).message().find("--quantization 'int4'"),
            std::string::npos);
  for (const char* name : {"", "auto", "int8", "fp8", "fp8_e4m3"}) {
    EXPECT_TRUE(CheckKvCacheDtype(name, false).ok()) << name;
  }
  EXPECT_TRUE(CheckKvCacheDtype("auto", true).ok());
  EXPECT_FALSE(CheckKvCacheDtype("int8", true).ok());
  EXPECT_NE(CheckKvCacheDtype("fp8_e5m2", false).message().find("--kv-cache-dtype 'fp8_e5m2'"),
            std::string::npos);
  EXPECT_EQ(*ParseServedReservationPolicy("pow2"), ReservationPolicy::kPow2);
  EXPECT_NE(ParseServedReservationPolicy("oracle").status().message().find("folio-kvsim"),
            std::string::npos);
}

}  // namespace
}  // namespace folio
