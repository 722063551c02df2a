// End-to-end checks of the offline engine (scheduler + CPU worker in one
// process) on the demo model:
//  - greedy continuations reproduce models/folio-demo/reference.json (an
//    independent torch forward pass), tokens exactly, log-probs within its
//    tolerance;
//  - the same outputs, greedy and seeded sampling, across block sizes,
//    chunked prefill, prefix caching (and a second Generate() reusing the
//    cache) and preemption (tiny pool, recompute and swap);
//  - n / best_of / beam search shapes; bad input; and after every workload
//    the scheduler is drained with every block back in its pool.
// reference.json is read at test time: the demo model may be retrained.

#include "client/offline_engine.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using ::testing::HasSubstr;
using Request = OfflineEngine::Request;
using Result = OfflineEngine::Result;

const std::string kDemoDir = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
constexpr int32_t kMaxTokens = 24;
constexpr double kSameTol = 1e-4;  // log-probs of the same computation, batched differently

struct ReferenceCase {
  std::string prompt;
  std::vector<TokenId> prompt_ids, output_ids;
  std::vector<double> logprobs;
  std::string output_text;
};

struct Reference {
  std::vector<ReferenceCase> cases;
  int32_t max_tokens = 0;
  bool ignore_eos = true;
  double tolerance = 1e-3;
};

const Reference& LoadReference() {
  static const Reference* ref = [] {
    auto* r = new Reference;
    std::ifstream in(kDemoDir + "/reference.json");
    const nlohmann::json j = nlohmann::json::parse(in);
    r->max_tokens = j.at("max_tokens").get<int32_t>();
    r->ignore_eos = j.value("ignore_eos", true);
    r->tolerance = j.value("logprob_tolerance", 1e-3);
    for (const auto& c : j.at("cases")) {
      r->cases.push_back({c.value("prompt", ""), c.at("prompt_token_ids").get<std::vector<TokenId>>(),
                          c.at("output_token_ids").get<std::vector<TokenId>>(),
                          c.at("logprobs").get<std::vector<double>>(), c.value("output_text", "")});
    }
    return r;
  }();
  return *ref;
}

// Prompts around block boundaries (17, 50, 16, 33, 1 tokens, sharing
// prefixes) cut from the reference prompts laid end to end, plus the last
// reference prompt as it is.
std::vector<std::vector<TokenId>> Prompts() {
  const Reference& ref = LoadReference();
  std::vector<TokenId> all = ref.cases.at(0).prompt_ids;
  for (size_t i = 1; all.size() < 50; ++i) {
    const std::vector<TokenId>& p = ref.cases.at(i % ref.cases.size()).prompt_ids;
    all.insert(all.end(), p.begin() + 1, p.end());  // without the BOS
  }
  std::vector<std::vector<TokenId>> out;
  for (size_t len : {17, 50, 16, 33, 1}) out.emplace_back(all.begin(), all.begin() + len);
  out.push_back(ref.cases.back().prompt_ids);
  return out;
}

SamplingParams Greedy(int32_t max_tokens = kMaxTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

SamplingParams Seeded(uint64_t seed) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  p.seed = seed;
  p.max_tokens = kMaxTokens;
  p.ignore_eos = true;
  return p;
}

Request FromIds(std::vector<TokenId> ids, SamplingParams p) {
  return Request{"", std::move(ids), p, std::nullopt, {}};
}

// Every prompt greedy, then every prompt seeded (the last with n = 2).
std::vector<Request> Workload() {
  const std::vector<std::vector<TokenId>> prompts = Prompts();
  std::vector<Request> out;
  for (const auto& p : prompts) out.push_back(FromIds(p, Greedy()));
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams s = Seeded(1000 + i);
    if (i + 1 == prompts.size() && prompts.size() > 2) s.n = s.best_of = 2;
    out.push_back(FromIds(prompts[i], s));
  }
  return out;
}

OfflineEngine::Options BaseOptions() {
  OfflineEngine::Options o;
  o.model_dir = kDemoDir;
  o.kv_cache_bytes = int64_t{64} << 20;
  o.enable_prefix_caching = false;
  o.check_invariants = true;
  return o;
}

std::unique_ptr<OfflineEngine> MakeEngine(const OfflineEngine::Options& o) {
  absl::StatusOr<std::unique_ptr<OfflineEngine>> e = OfflineEngine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

// Nothing left behind: no request, consistent KV state, every block free.
void ExpectDrained(const OfflineEngine& e) {
  const Scheduler& s = e.scheduler();
  EXPECT_FALSE(s.HasUnfinishedRequests());
  const absl::Status inv = s.CheckInvariants();
  EXPECT_TRUE(inv.ok()) << inv;
  const BlockPool& device = s.kv_cache().device_pool();
  const BlockPool& host = s.kv_cache().host_pool();
  EXPECT_EQ(device.num_free_blocks(), device.num_blocks());
  EXPECT_EQ(host.num_free_blocks(), host.num_blocks());
}

std::vector<Result> Generate(OfflineEngine& e, const std::vector<Request>& requests) {
  absl::StatusOr<std::vector<Result>> r = e.Generate(requests);
  EXPECT_TRUE(r.ok()) << r.status();
  ExpectDrained(e);
  if (!r.ok()) return {};
  EXPECT_EQ(r->size(), requests.size());
  for (size_t i = 0; i < r->size(); ++i) {
    const Result& res = (*r)[i];
    EXPECT_EQ(res.error, "") << "request " << i;
    EXPECT_EQ(res.sequences.size(), static_cast<size_t>(requests[i].sampling.n)) << "request " << i;
    for (const OfflineEngine::Sequence& s : res.sequences) {
      EXPECT_EQ(s.token_ids.size(), s.logprobs.size());
      EXPECT_NE(s.finish_reason, FinishReason::kNone) << "request " << i;
    }
  }
  return std::move(*r);
}

void ExpectSame(const std::vector<Result>& want, const std::vector<Result>& got, double tol) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].sequences.size(), got[i].sequences.size()) << "request " << i;
    for (size_t s = 0; s < want[i].sequences.size(); ++s) {
      const OfflineEngine::Sequence& a = want[i].sequences[s];
      const OfflineEngine::Sequence& b = got[i].sequences[s];
      EXPECT_EQ(a.token_ids, b.token_ids) << "request " << i << " sequence " << s;
      EXPECT_EQ(a.finish_reason, b.finish_reason) << "request " << i << " sequence " << s;
      for (size_t t = 0; t < std::min(a.logprobs.size(), b.logprobs.size()); ++t) {
        ASSERT_NEAR(a.logprobs[t], b.logprobs[t], tol) << "request " << i << " sequence " << s << " token " << t;
      }
    }
  }
}

TEST(OfflineEngineReferenceTest, ReproducesReferenceJson) {
  const Reference& ref = LoadReference();
  ASSERT_FALSE(ref.cases.empty());
  auto engine = MakeEngine(BaseOptions());
  ASSERT_NE(engine, nullptr);
  std::vector<Request> requests;
  for (const ReferenceCase& c : ref.cases) {
    SamplingParams p = Greedy(ref.max_tokens);
    p.ignore_eos = ref.ignore_eos;
    requests.push_back(FromIds(c.prompt_ids, p));
  }
  const std::vector<Result> results = Generate(*engine, requests);
  ASSERT_EQ(results.size(), ref.cases.size());
  for (size_t i = 0; i < ref.cases.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << ref.cases[i].prompt);
    const ReferenceCase& c = ref.cases[i];
    ASSERT_EQ(results[i].sequences.size(), 1u);
    const OfflineEngine::Sequence& s = results[i].sequences[0];
    EXPECT_EQ(results[i].prompt_token_ids, c.prompt_ids);
    EXPECT_EQ(s.token_ids, c.output_ids);
    ASSERT_EQ(s.logprobs.size(), c.logprobs.size());
    for (size_t t = 0; t < c.logprobs.size(); ++t) {
      EXPECT_NEAR(s.logprobs[t], c.logprobs[t], ref.tolerance) << "token " << t;
    }
    if (!c.output_text.empty()) {
      EXPECT_EQ(s.text, c.output_text);
    }
  }
  // Text prompts tokenize (with BOS) to the reference prompt ids.
  if (!ref.cases[0].prompt.empty()) {
    const std::vector<Result> text =
        Generate(*engine, {Request{ref.cases[0].prompt, std::nullopt, Greedy(4), std::nullopt, {}}});
    ASSERT_EQ(text.size(), 1u);
    EXPECT_EQ(text[0].prompt_token_ids, ref.cases[0].prompt_ids);
  }
}

// The baseline of the variations: block 16, one-shot prefill, no prefix
// caching, an ample pool. Computed once per test process.
const std::vector<Result>& Baseline() {
  static const std::vector<Result>* baseline = [] {
    auto engine = MakeEngine(BaseOptions());
    return new std::vector<Result>(Generate(*engine, Workload()));
  }();
  return *baseline;
}

// Blocks one sequence of the workload needs at most, at block size 16.
int32_t MaxBlocksPerSequence() {
  size_t longest = 0;
  for (const auto& p : Prompts()) longest = std::max(longest, p.size());
  return static_cast<int32_t>((longest + kMaxTokens + 15) / 16);
}

struct Variation {
  std::string name;
  std::function<void(OfflineEngine::Options&)> configure;
  size_t max_prompts = 100;  // a prefix of the baseline's prompts
  PreemptionMode expect_preemption = PreemptionMode::kAuto;  // kAuto: none required
};

// Runs the workload (or its first max_prompts prompts, greedy and seeded)
// under `v` and expects the baseline's outputs; with prefix caching, runs it
// again in the same engine and expects cache hits and the same outputs.
void ExpectSameAsBaseline(const Variation& v) {
  SCOPED_TRACE(v.name);
  const std::vector<Result>& baseline = Baseline();
  const std::vector<Request> full = Workload();
  std::vector<Request> requests;
  std::vector<Result> want;
  const size_t half = full.size() / 2, keep = std::min(v.max_prompts, half);
  for (size_t part : {size_t{0}, half}) {
    for (size_t i = 0; i < keep; ++i) {
      requests.push_back(full[part + i]);
      want.push_back(baseline[part + i]);
    }
  }
  OfflineEngine::Options o = BaseOptions();
  v.configure(o);
  auto engine = MakeEngine(o);
  ASSERT_NE(engine, nullptr);
  ExpectSame(want, Generate(*engine, requests), kSameTol);
  const SchedulerStats& stats = engine->scheduler().stats();
  if (v.expect_preemption == PreemptionMode::kRecompute) {
    EXPECT_GT(stats.num_preemptions_recompute, 0);
  }
  if (v.expect_preemption == PreemptionMode::kSwap) {
    EXPECT_GT(stats.num_preemptions_swap, 0);
  }
  if (!o.enable_prefix_caching) return;
  const std::vector<Result> again = Generate(*engine, requests);
  ExpectSame(want, again, kSameTol);
  int32_t cached = 0;
  for (size_t i = 0; i < again.size(); ++i) {
    // With room to keep them, the full blocks of every prompt are reused
    // (a tiny pool may have evicted some).
    if (o.num_device_blocks == 0 && again[i].prompt_token_ids.size() > static_cast<size_t>(o.block_size)) {
      EXPECT_GE(again[i].num_cached_prompt_tokens, o.block_size) << "request " << i;
    }
    cached += again[i].num_cached_prompt_tokens;
  }
  EXPECT_GT(cached, 0);
}

TEST(OfflineEngineVariationTest, BlockSizes) {
  ExpectSameAsBaseline({"block 8", [](auto& o) { o.block_size = 8; }});
  ExpectSameAsBaseline({"block 32", [](auto& o) { o.block_size = 32; }});
}

TEST(OfflineEngineVariationTest, ChunkedPrefill) {
  // A budget of one token runs one sequence at a time.
  ExpectSameAsBaseline({"chunk 1",
                        [](auto& o) {
                          o.max_num_batched_tokens = 1;
                          o.max_num_seqs = 1;
                        },
                        /*max_prompts=*/1});
  ExpectSameAsBaseline({"chunk 2, 2 sequences",
                        [](auto& o) {
                          o.max_num_batched_tokens = 2;
                          o.max_num_seqs = 2;
                        },
                        /*max_prompts=*/2});
  ExpectSameAsBaseline({"chunk 7", [](auto& o) { o.max_num_batched_tokens = 7; }});
  ExpectSameAsBaseline({"chunk 64", [](auto& o) { o.max_num_batched_tokens = 64; }});
}

TEST(OfflineEngineVariationTest, PrefixCaching) {
  ExpectSameAsBaseline({"prefix caching", [](auto& o) { o.enable_prefix_caching = true; }});
  ExpectSameAsBaseline({"prefix caching, block 8, chunk 7", [](auto& o) {
                          o.enable_prefix_caching = true;
                          o.block_size = 8;
                          o.max_num_batched_tokens = 7;
                        }});
}

TEST(OfflineEngineVariationTest, Preemption) {
  const int32_t tiny = MaxBlocksPerSequence() + 3;  // one or two sequences at a time
  ExpectSameAsBaseline({"recompute",
                        [&](auto& o) {
                          o.num_device_blocks = tiny;
                          o.preemption_mode = PreemptionMode::kRecompute;
                        },
                        100, PreemptionMode::kRecompute});
  ExpectSameAsBaseline({"swap",
                        [&](auto& o) {
                          o.num_device_blocks = tiny;
                          o.num_host_blocks = 64;
                          o.preemption_mode = PreemptionMode::kSwap;
                        },
                        100, PreemptionMode::kSwap});
  ExpectSameAsBaseline({"swap, prefix caching, chunk 7",
                        [&](auto& o) {
                          o.num_device_blocks = tiny;
                          o.num_host_blocks = 64;
                          o.preemption_mode = PreemptionMode::kSwap;
                          o.enable_prefix_caching = true;
                          o.max_num_batched_tokens = 7;
                        },
                        100, PreemptionMode::kSwap});
}

TEST(OfflineEngineSamplingTest, SeededSamplingDependsOnTheSeedOnly) {
  auto engine = MakeEngine(BaseOptions());
  ASSERT_NE(engine, nullptr);
  const std::vector<TokenId> prompt = Prompts().at(3);
  // Same seed twice in one batch: same tokens; another seed: other tokens.
  const std::vector<Result> r = Generate(*engine, {FromIds(prompt, Seeded(7)), FromIds(prompt, Seeded(7)),
                                                   FromIds(prompt, Seeded(8))});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].sequences[0].token_ids, r[1].sequences[0].token_ids);
  EXPECT_NE(r[0].sequences[0].token_ids, r[2].sequences[0].token_ids);
}

int32_t CountWithReason(const Result& r, FinishReason reason) {
  return static_cast<int32_t>(std::count_if(r.sequences.begin(), r.sequences.end(),
                                            [&](const auto& s) { return s.finish_reason == reason; }));
}

TEST(OfflineEngineSamplingTest, NBestOfAndBeamSearchReturnTheirSequences) {
  auto engine = MakeEngine(BaseOptions());
  ASSERT_NE(engine, nullptr);
  const std::vector<TokenId> prompt = Prompts().at(3);
  SamplingParams n2 = Seeded(3);
  n2.n = n2.best_of = 2;
  SamplingParams best_of = Seeded(4);
  best_of.n = 2;
  best_of.best_of = 4;
  SamplingParams beam = Greedy(12);
  beam.beam_width = 3;
  beam.n = 2;
  SamplingParams beam_eos = Greedy(12);  // may stop at EOS
  beam_eos.ignore_eos = false;
  beam_eos.beam_width = 4;
  const std::vector<Result> r = Generate(
      *engine, {FromIds(prompt, n2), FromIds(prompt, best_of), FromIds(prompt, beam), FromIds(prompt, beam_eos)});
  ASSERT_EQ(r.size(), 4u);
  for (size_t i = 0; i < r.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    for (size_t s = 0; s < r[i].sequences.size(); ++s) {
      const OfflineEngine::Sequence& seq = r[i].sequences[s];
      EXPECT_EQ(seq.index, static_cast<int32_t>(s));
      EXPECT_FALSE(seq.token_ids.empty());
      double sum = 0.0;
      for (float lp : seq.logprobs) sum += lp;
      EXPECT_NEAR(seq.cumulative_logprob, sum, 1e-3);
      EXPECT_EQ(seq.text, engine->tokenizer().Decode(seq.token_ids));
    }
  }
  // n = best_of: both samples, full length; they differ.
  EXPECT_EQ(CountWithReason(r[0], FinishReason::kLength), 2);
  EXPECT_EQ(r[0].sequences[0].token_ids.size(), static_cast<size_t>(kMaxTokens));
  EXPECT_NE(r[0].sequences[0].token_ids, r[0].sequences[1].token_ids);
  // best_of 4 -> the 2 best by cumulative log-prob.
  EXPECT_EQ(CountWithReason(r[1], FinishReason::kLength), 2);
  EXPECT_GE(r[1].sequences[0].cumulative_logprob, r[1].sequences[1].cumulative_logprob);
  // Beam search: n best beams, best first, distinct.
  EXPECT_EQ(CountWithReason(r[2], FinishReason::kLength), 2);
  EXPECT_EQ(r[2].sequences[0].token_ids.size(), 12u);
  EXPECT_GE(r[2].sequences[0].cumulative_logprob, r[2].sequences[1].cumulative_logprob);
  EXPECT_NE(r[2].sequences[0].token_ids, r[2].sequences[1].token_ids);
  ASSERT_EQ(r[3].sequences.size(), 1u);
  const FinishReason reason = r[3].sequences[0].finish_reason;
  EXPECT_TRUE(reason == FinishReason::kLength || reason == FinishReason::kEos) << FinishReasonName(reason);

  // Beam search is deterministic and survives preemption unchanged.
  OfflineEngine::Options tiny = BaseOptions();
  tiny.num_device_blocks = 16;  // less than the 4 requests' 11 sequences hold at once
  tiny.preemption_mode = PreemptionMode::kRecompute;
  auto small = MakeEngine(tiny);
  ASSERT_NE(small, nullptr);
  const std::vector<Result> again = Generate(
      *small, {FromIds(prompt, n2), FromIds(prompt, best_of), FromIds(prompt, beam), FromIds(prompt, beam_eos)});
  ExpectSame(r, again, kSameTol);
}

// Top-N log-probs reach Result::Sequence: one list per output token, N
// long, best first; greedy tokens lead their list; sampled tokens that are
// in their list carry the same log-prob; n = 2 fans both sequences out with
// their own lists; chunked prefill gives the same lists; none unless asked.
TEST(OfflineEngineSamplingTest, TopLogprobsArriveWithEveryToken) {
  const std::vector<TokenId> prompt = Prompts().at(1);
  SamplingParams greedy = Greedy(10);
  greedy.logprobs = 4;
  SamplingParams sampled = Seeded(21);
  sampled.max_tokens = 10;
  sampled.n = sampled.best_of = 2;
  sampled.logprobs = 3;
  const std::vector<Request> requests = {FromIds(prompt, greedy), FromIds(prompt, sampled),
                                         FromIds(prompt, Greedy(3))};
  auto engine = MakeEngine(BaseOptions());
  ASSERT_NE(engine, nullptr);
  const std::vector<Result> r = Generate(*engine, requests);
  ASSERT_EQ(r.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    const size_t n = i == 0 ? 4 : 3;
    for (const OfflineEngine::Sequence& seq : r[i].sequences) {
      SCOPED_TRACE(::testing::Message() << "request " << i << " sequence " << seq.index);
      ASSERT_EQ(seq.top_logprobs.size(), seq.token_ids.size());
      for (size_t t = 0; t < seq.token_ids.size(); ++t) {
        const std::vector<TokenLogprob>& top = seq.top_logprobs[t];
        ASSERT_EQ(top.size(), n) << "token " << t;
        double mass = 0.0;
        for (size_t k = 0; k < n; ++k) {
          mass += std::exp(top[k].logprob);
          if (k > 0) {
            EXPECT_GE(top[k - 1].logprob, top[k].logprob);
          }
          if (top[k].token_id == seq.token_ids[t]) {
            EXPECT_FLOAT_EQ(top[k].logprob, seq.logprobs[t]);
          }
        }
        EXPECT_LE(mass, 1.0 + 1e-4);
        if (i == 0) {
          EXPECT_EQ(top[0].token_id, seq.token_ids[t]);
        }
      }
    }
  }
  EXPECT_TRUE(r[2].sequences[0].top_logprobs.empty());

  OfflineEngine::Options chunked = BaseOptions();
  chunked.max_num_batched_tokens = 7;
  auto small = MakeEngine(chunked);
  ASSERT_NE(small, nullptr);
  const std::vector<Result> again = Generate(*small, requests);
  ExpectSame(r, again, kSameTol);
  for (int i = 0; i < 2; ++i) {
    for (size_t s = 0; s < r[i].sequences.size(); ++s) {
      const auto& a = r[i].sequences[s].top_logprobs;
      const auto& b = again[i].sequences[s].top_logprobs;
      ASSERT_EQ(a.size(), b.size());
      for (size_t t = 0; t < a.size(); ++t) {
        ASSERT_EQ(a[t].size(), b[t].size());
        for (size_t k = 0; k < a[t].size(); ++k) {
          EXPECT_NEAR(a[t][k].logprob, b[t][k].logprob, kSameTol);
        }
      }
    }
  }
}

// --kv-cache-dtype reaches the worker: the same kv_cache_bytes hold the
// blocks of its type (codes and scales), about 4x the float32 blocks for the
// one-byte types. (Only sized here: nothing is generated.)
TEST(OfflineEngineVariationTest, KvCacheDtypeSizesThePool) {
  int32_t fp32_blocks = 0;
  for (kernels::CacheDtype dtype : {kernels::CacheDtype::kFloat32, kernels::CacheDtype::kInt8,
                                    kernels::CacheDtype::kFp8E4m3}) {
    SCOPED_TRACE(static_cast<int>(dtype));
    OfflineEngine::Options o = BaseOptions();
    o.kv_cache_dtype = dtype;
    auto engine = MakeEngine(o);
    ASSERT_NE(engine, nullptr);
    const ModelConfig& c = engine->model_config();
    const int64_t block_bytes =
        CacheEngine::BytesPerBlock(c.num_layers, c.num_kv_heads, c.head_dim, o.block_size, dtype);
    const int32_t blocks = engine->scheduler().config().num_device_blocks;
    EXPECT_EQ(blocks, o.kv_cache_bytes / block_bytes);
    if (dtype == kernels::CacheDtype::kFloat32) {
      fp32_blocks = blocks;
    } else {
      EXPECT_GT(blocks, 3 * fp32_blocks);
      EXPECT_LE(blocks, 4 * fp32_blocks);
    }
  }
}

// A quantized cache under the block moves: the workload (greedy, seeded, n =
// 2, so copy-on-write) on an int8 / fp8 cache, then again with swap
// preemption and with prefix caching (served twice). Swapped and shared
// blocks carry their codes and scales unchanged (kv_quant_test checks the
// bytes), so the outputs are the quantized baseline's: the same tokens, and
// log-probs within kQuantizedTol. Not kSameTol: other batch compositions
// round K and V differently in the last bit, which now and then moves a value
// to the neighbouring code, and that step (1/127 of a block's range) shows in
// the log-probs. Lost or misplaced scales would move them by far more.
// Recompute preemption rewrites blocks in other groupings, so there only
// completion and the pool are checked.
TEST(OfflineEngineVariationTest, QuantizedKvCacheSurvivesSwapCopyAndPrefixSharing) {
  constexpr double kQuantizedTol = 0.02;
  const std::vector<Request> requests = Workload();
  const int32_t tiny = MaxBlocksPerSequence() + 3;
  for (kernels::CacheDtype dtype : {kernels::CacheDtype::kInt8, kernels::CacheDtype::kFp8E4m3}) {
    SCOPED_TRACE(dtype == kernels::CacheDtype::kInt8 ? "int8" : "fp8");
    OfflineEngine::Options base = BaseOptions();
    base.kv_cache_dtype = dtype;
    auto engine = MakeEngine(base);
    ASSERT_NE(engine, nullptr);
    const std::vector<Result> want = Generate(*engine, requests);
    ASSERT_EQ(want.size(), requests.size());

    OfflineEngine::Options swap = base;
    swap.num_device_blocks = tiny;
    swap.num_host_blocks = 64;
    swap.preemption_mode = PreemptionMode::kSwap;
    auto swapping = MakeEngine(swap);
    ASSERT_NE(swapping, nullptr);
    ExpectSame(want, Generate(*swapping, requests), kQuantizedTol);
    EXPECT_GT(swapping->scheduler().stats().num_preemptions_swap, 0);

    OfflineEngine::Options cached = base;
    cached.enable_prefix_caching = true;
    auto caching = MakeEngine(cached);
    ASSERT_NE(caching, nullptr);
    ExpectSame(want, Generate(*caching, requests), kQuantizedTol);
    const std::vector<Result> again = Generate(*caching, requests);
    ExpectSame(want, again, kQuantizedTol);
    int32_t hits = 0;
    for (const Result& r : again) hits += r.num_cached_prompt_tokens;
    EXPECT_GT(hits, 0);

    OfflineEngine::Options recompute = base;
    recompute.num_device_blocks = tiny;
    recompute.preemption_mode = PreemptionMode::kRecompute;
    auto recomputing = MakeEngine(recompute);
    ASSERT_NE(recomputing, nullptr);
    EXPECT_EQ(Generate(*recomputing, requests).size(), requests.size());
    EXPECT_GT(recomputing->scheduler().stats().num_preemptions_recompute, 0);
  }
}

TEST(OfflineEngineInputTest, BadInputIsInvalidArgumentAndTheEngineRecovers) {
  auto engine = MakeEngine(BaseOptions());
  ASSERT_NE(engine, nullptr);
  const int32_t vocab = engine->model_config().vocab_size;
  const Reference& ref = LoadReference();
  const Request good = FromIds(ref.cases[0].prompt_ids, Greedy(8));
  SamplingParams zero = Greedy();
  zero.max_tokens = 0;
  struct Bad {
    Request request;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {FromIds({}, Greedy()), "prompt"},
      {FromIds({ref.cases[0].prompt_ids[0], vocab}, Greedy()), "prompt"},
      {FromIds({ref.cases[0].prompt_ids[0], -1}, Greedy()), "prompt"},
      {FromIds(ref.cases[0].prompt_ids, zero), "max_tokens"},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "bad input " << i);
    // A good request queued before the bad one must not linger either.
    absl::StatusOr<std::vector<Result>> r = engine->Generate({good, bad[i].request});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(bad[i].field));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("request 1"));
    ExpectDrained(*engine);
    const std::vector<Result> ok = Generate(*engine, {good});
    ASSERT_EQ(ok.size(), 1u);
    ASSERT_EQ(ok[0].sequences.size(), 1u);
    const std::vector<TokenId> want(ref.cases[0].output_ids.begin(), ref.cases[0].output_ids.begin() + 8);
    EXPECT_EQ(ok[0].sequences[0].token_ids, want);
  }
  // Out of vocabulary names the offending id.
  absl::StatusOr<std::vector<Result>> oov = engine->Generate({FromIds({vocab + 5}, Greedy())});
  ASSERT_FALSE(oov.ok());
  EXPECT_THAT(std::string(oov.status().message()), HasSubstr(std::to_string(vocab + 5)));
  ExpectDrained(*engine);
}

}  // namespace
}  // namespace folio
