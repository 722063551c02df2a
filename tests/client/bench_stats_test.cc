// folio bench's statistics (client/bench/stats.h) and workloads
// (client/bench/workload.h): percentiles, TPOT, the summary's totals and
// throughputs, and seeded prompts and arrivals.

#include "client/bench/stats.h"

#include <cmath>
#include <limits>

#include "client/bench/workload.h"
#include "gtest/gtest.h"

namespace folio::bench {
namespace {

TEST(PercentileTest, InterpolatesLinearlyLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted: 1 2 3 4
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);   // rank 2.7
  EXPECT_DOUBLE_EQ(Percentile(v, 99), 3.97);  // rank 2.97
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
}

TEST(DistributionTest, MillisecondsOfSeconds) {
  const Distribution d = Distribution::Of({0.001, 0.002, 0.003, 0.010});
  EXPECT_DOUBLE_EQ(d.mean, 4);
  EXPECT_DOUBLE_EQ(d.median, 2.5);
  EXPECT_NEAR(d.p90, 7.9, 1e-9);
  EXPECT_NEAR(d.p99, 9.79, 1e-9);
}

RequestRecord Record(double ttft, double e2e, int32_t tokens, int32_t prompt = 10) {
  RequestRecord r;
  r.success = true;
  r.ttft = ttft;
  r.e2e = e2e;
  r.output_tokens = tokens;
  r.prompt_tokens = prompt;
  for (int32_t i = 0; i < tokens; ++i) {
    r.token_times.push_back(tokens == 1 ? ttft : ttft + (e2e - ttft) * i / (tokens - 1));
  }
  return r;
}

TEST(TpotTest, ExcludesTheFirstToken) {
  EXPECT_DOUBLE_EQ(Tpot(Record(0.1, 0.5, 5)), 0.1);  // (0.5 - 0.1) / 4
  EXPECT_DOUBLE_EQ(Tpot(Record(0.1, 0.1, 1)), 0);
}

TEST(SummarizeTest, CountsSuccessesOnly) {
  RequestRecord failed;
  failed.error = "boom";
  failed.output_tokens = 99;
  const Summary s = Summarize({Record(0.1, 0.5, 5), Record(0.2, 0.2, 1), failed}, 2.0);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.total_input_tokens, 20);
  EXPECT_EQ(s.total_output_tokens, 6);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 3.0);
  EXPECT_DOUBLE_EQ(s.input_throughput, 10.0);
  EXPECT_DOUBLE_EQ(s.total_token_throughput, 13.0);
  EXPECT_DOUBLE_EQ(s.ttft.mean, 150);
  EXPECT_DOUBLE_EQ(s.e2e.median, 350);
  // Only the 5-token request has a TPOT; its 4 gaps are the ITLs.
  EXPECT_DOUBLE_EQ(s.tpot.mean, 100);
  EXPECT_NEAR(s.itl.mean, 100, 1e-9);
  EXPECT_NEAR(s.itl.p99, 100, 1e-9);
  // Normalized latency: 500 ms / 5 tokens and 200 ms / 1 token.
  EXPECT_DOUBLE_EQ(s.normalized.mean, 150);
  EXPECT_DOUBLE_EQ(s.normalized.median, 150);
}

TEST(SummarizeTest, TokensOfOneMessageGiveOneInterTokenGap) {
  // 7 tokens in three messages (1, 4, 2 tokens) at 0.1, 0.5 and 0.7 s.
  RequestRecord r = Record(0.1, 0.7, 7);
  r.token_times = {0.1, 0.5, 0.5, 0.5, 0.5, 0.7, 0.7};
  const Summary s = Summarize({r}, 1.0);
  EXPECT_NEAR(s.itl.mean, 300, 1e-9);  // (400 + 200) / 2: zero gaps left out
  EXPECT_NEAR(s.itl.median, 300, 1e-9);
  EXPECT_NEAR(s.tpot.mean, 100, 1e-9);  // (700 - 100) / 6: per token, whatever the messages
}

TEST(SummarizeTest, ReportAndJsonCarryTheFigures) {
  const Summary s = Summarize({Record(0.1, 0.5, 5)}, 1.0);
  const std::string report = FormatReport(s);
  EXPECT_NE(report.find("Successful requests:                     1"), std::string::npos) << report;
  EXPECT_NE(report.find("Mean TPOT (ms):                          100.00"), std::string::npos) << report;
  EXPECT_NE(report.find("Mean normalized latency (ms/token):      100.00"), std::string::npos) << report;
  const nlohmann::json j = ToJson(s);
  EXPECT_EQ(j["completed"], 1);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["median"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(j["normalized_latency_ms"]["mean"].get<double>(), 100);
}

TEST(SloTest, ParsesMillisecondsAndRefusesTheRest) {
  absl::StatusOr<Slo> slo = ParseSlo("ttft=500,tpot=50");
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_EQ(slo->ttft_ms, 500);
  EXPECT_EQ(slo->tpot_ms, 50);
  EXPECT_FALSE(slo->e2el_ms.has_value());
  for (const char* bad : {"", "ttft", "ttft=", "ttft=-1", "ttft=0", "ttft=abc", "itl=5",
                          "ttft=1=2", "ttft=inf"}) {
    absl::StatusOr<Slo> s = ParseSlo(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("--slo"), std::string::npos) << s.status();
  }
}

TEST(SloTest, GoodputCountsRequestsMeetingEveryBound) {
  RequestRecord failed;
  failed.error = "boom";
  // TTFT 100 / 300 / 100 ms; TPOT 100 / 100 / 25 ms.
  const std::vector<RequestRecord> records = {Record(0.1, 0.5, 5), Record(0.3, 0.7, 5),
                                              Record(0.1, 0.2, 5), failed};
  const Summary none = Summarize(records, 2.0);
  EXPECT_FALSE(none.slo.has_value());
  EXPECT_EQ(FormatReport(none).find("goodput"), std::string::npos);
  const Summary ttft = Summarize(records, 2.0, *ParseSlo("ttft=200"));
  EXPECT_EQ(ttft.good, 2);
  EXPECT_DOUBLE_EQ(ttft.request_goodput, 1.0);
  const Summary both = Summarize(records, 2.0, *ParseSlo("ttft=200,tpot=50"));
  EXPECT_EQ(both.good, 1);
  EXPECT_NE(FormatReport(both).find("Request goodput (req/s):                 0.50"),
            std::string::npos)
      << FormatReport(both);
  const nlohmann::json j = ToJson(both);
  EXPECT_EQ(j["good_requests"], 1);
  EXPECT_DOUBLE_EQ(j["slo"]["tpot_ms"].get<double>(), 50);
  EXPECT_EQ(Summarize(records, 2.0, *ParseSlo("e2el=250")).good, 1);
}

TEST(WorkloadTest, RandomPromptsAreSeededAndAvoidTheTopIds) {
  WorkloadOptions o;
  o.num_prompts = 20;
  o.input_len = 16;
  o.output_len = 8;
  o.vocab_size = 2048;
  o.seed = 3;
  absl::StatusOr<std::vector<BenchRequest>> a = MakeWorkload(o), b = MakeWorkload(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 20u);
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].prompt_token_ids, (*b)[i].prompt_token_ids);
    EXPECT_EQ((*a)[i].prompt_token_ids.size(), 16u);
    EXPECT_EQ((*a)[i].output_len, 8);
    for (int32_t id : (*a)[i].prompt_token_ids) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 2046);
    }
  }
  o.max_model_len = 20;
  EXPECT_FALSE(MakeWorkload(o).ok());
  o.max_model_len = 0;
  o.dataset = "sharegpt";
  absl::StatusOr<std::vector<BenchRequest>> t = MakeWorkload(o);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 20u);
  o.dataset = "/nonexistent.jsonl";
  EXPECT_NE(MakeWorkload(o).status().message().find("--dataset"), std::string::npos);
}

TEST(ArrivalTest, InfiniteRateSendsAtOnceFiniteIsPoisson) {
  for (double t : ArrivalTimes(5, std::numeric_limits<double>::infinity(), 1)) EXPECT_EQ(t, 0);
  const std::vector<double> a = ArrivalTimes(2000, 100, 7);
  EXPECT_EQ(a, ArrivalTimes(2000, 100, 7));
  for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
  EXPECT_NEAR(a.back() / (a.size() - 1), 0.01, 0.001);  // mean gap 1 / rate
}

}  // namespace
}  // namespace folio::bench
