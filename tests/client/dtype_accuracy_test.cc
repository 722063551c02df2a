// How far bf16 and int8 weight storage (--dtype bfloat16, --quantization
// int8) and an int8 or fp8 KV cache (--kv-cache-dtype) move a model's
// outputs from the fp32 path, on the demo model and on random models (the
// `random_models` fixture, tests/client/CMakeLists.txt):
//   - free-running greedy: the share of output tokens equal to fp32's, up to
//     the first difference (after it the contexts differ);
//   - teacher-forced on fp32's own greedy output (fed back as a prompt and
//     scored with prompt_logprobs): the share of positions whose top-1 token
//     is fp32's, and mean / max |Δ log-prob| of fp32's token.
// Each case prints its figures (docs/performance.md quotes them) and checks
// them against bounds; every engine ends with all KV blocks free.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "client/offline_engine.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

const std::string kDemoDir = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
constexpr int32_t kPrompts = 4;
constexpr int32_t kPromptLen = 12;
constexpr int32_t kOutputLen = 64;

struct Figures {
  double greedy_prefix_share = 0;   // free-running
  double top1_agreement = 0;        // teacher-forced
  double mean_abs_dlogprob = 0;
  double max_abs_dlogprob = 0;
};

struct Variant {
  const char* name;
  std::optional<DType> dtype;
  const char* quantization;
  kernels::CacheDtype kv_cache_dtype = kernels::CacheDtype::kFloat32;
};

std::unique_ptr<OfflineEngine> Engine(const std::string& dir, const Variant& v) {
  OfflineEngine::Options o;
  o.model_dir = dir;
  o.kv_cache_bytes = int64_t{32} << 20;
  o.dtype = v.dtype;
  o.quantization = v.quantization;
  o.kv_cache_dtype = v.kv_cache_dtype;
  o.enable_prefix_caching = false;
  o.check_invariants = true;
  absl::StatusOr<std::unique_ptr<OfflineEngine>> e = OfflineEngine::Create(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<OfflineEngine::Request> GreedyRequests(int32_t vocab) {
  std::vector<OfflineEngine::Request> out(kPrompts);
  for (int32_t p = 0; p < kPrompts; ++p) {
    std::vector<TokenId> ids;
    for (int32_t t = 0; t < kPromptLen; ++t) ids.push_back((p * 131 + t * 37 + 11) % vocab);
    out[p].prompt_token_ids = ids;
    out[p].sampling.temperature = 0;
    out[p].sampling.max_tokens = kOutputLen;
    out[p].sampling.ignore_eos = true;
  }
  return out;
}

void ExpectAllBlocksFree(const OfflineEngine& e) {
  const KvCacheManager& kv = e.scheduler().kv_cache();
  EXPECT_EQ(kv.device_pool().num_free_blocks(), kv.device_pool().num_blocks());
}

Figures Compare(const std::string& dir, const Variant& variant) {
  Figures f;
  std::unique_ptr<OfflineEngine> fp32 = Engine(dir, {"float32", DType::kF32, ""});
  std::unique_ptr<OfflineEngine> other = Engine(dir, variant);
  if (fp32 == nullptr || other == nullptr) return f;
  const std::vector<OfflineEngine::Request> requests =
      GreedyRequests(fp32->model_config().vocab_size);
  absl::StatusOr<std::vector<OfflineEngine::Result>> want = fp32->Generate(requests);
  absl::StatusOr<std::vector<OfflineEngine::Result>> got = other->Generate(requests);
  EXPECT_TRUE(want.ok() && got.ok());
  if (!want.ok() || !got.ok()) return f;

  // Teacher-forced: fp32's prompt + output, scored by the other variant.
  std::vector<OfflineEngine::Request> scoring(kPrompts);
  int64_t same_prefix = 0, positions = 0, top1 = 0;
  for (int32_t p = 0; p < kPrompts; ++p) {
    const std::vector<TokenId>& a = (*want)[p].sequences[0].token_ids;
    const std::vector<TokenId>& b = (*got)[p].sequences[0].token_ids;
    EXPECT_EQ(a.size(), size_t(kOutputLen));
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    same_prefix += static_cast<int64_t>(n);
    std::vector<TokenId> ids = *requests[p].prompt_token_ids;
    ids.insert(ids.end(), a.begin(), a.end());
    scoring[p].prompt_token_ids = ids;
    scoring[p].sampling.temperature = 0;
    scoring[p].sampling.max_tokens = 1;
    scoring[p].sampling.prompt_logprobs = 1;
  }
  absl::StatusOr<std::vector<OfflineEngine::Result>> scored = other->Generate(scoring);
  EXPECT_TRUE(scored.ok());
  if (!scored.ok()) return f;
  double sum_abs = 0;
  for (int32_t p = 0; p < kPrompts; ++p) {
    const OfflineEngine::Sequence& ref = (*want)[p].sequences[0];
    const std::vector<SampledToken>& pl = *(*scored)[p].prompt_logprobs;
    // pl[i] scores prompt token i + 1; fp32's output token j is prompt token kPromptLen + j.
    for (int32_t j = 0; j < kOutputLen; ++j) {
      const SampledToken& s = pl[kPromptLen + j - 1];
      EXPECT_EQ(s.token_id, ref.token_ids[j]);
      const double d = std::fabs(double(s.logprob) - ref.logprobs[j]);
      sum_abs += d;
      f.max_abs_dlogprob = std::max(f.max_abs_dlogprob, d);
      top1 += !s.top_logprobs.empty() && s.top_logprobs[0].token_id == ref.token_ids[j];
      ++positions;
    }
  }
  f.greedy_prefix_share = double(same_prefix) / (kPrompts * kOutputLen);
  f.top1_agreement = double(top1) / positions;
  f.mean_abs_dlogprob = sum_abs / positions;
  std::printf("%-22s %-9s greedy same-prefix %5.1f%%  top-1 %5.1f%%  |dlogprob| mean %.4f max %.4f\n",
              dir.substr(dir.find_last_of('/') + 1).c_str(), variant.name,
              100 * f.greedy_prefix_share, 100 * f.top1_agreement, f.mean_abs_dlogprob,
              f.max_abs_dlogprob);
  ExpectAllBlocksFree(*fp32);
  ExpectAllBlocksFree(*other);
  return f;
}

class DtypeAccuracyTest : public ::testing::TestWithParam<std::string> {};

// bf16 rounds each weight by at most 2^-9 relatively: outputs move little.
// On the demo model (a bf16 checkpoint) bf16 storage is exact: identical.
TEST_P(DtypeAccuracyTest, Bfloat16StaysCloseToFloat32) {
  const Figures f = Compare(GetParam(), {"bfloat16", DType::kBF16, ""});
  EXPECT_GE(f.top1_agreement, 0.95);
  EXPECT_LE(f.mean_abs_dlogprob, 0.01);
  EXPECT_LE(f.max_abs_dlogprob, 0.1);
}

// int8 steps are max|w| / 127 per output row: a larger, still small change.
TEST_P(DtypeAccuracyTest, Int8StaysCloseToFloat32) {
  const Figures f = Compare(GetParam(), {"int8", std::nullopt, "int8"});
  EXPECT_GE(f.top1_agreement, 0.85);
  EXPECT_LE(f.mean_abs_dlogprob, 0.05);
  EXPECT_LE(f.max_abs_dlogprob, 0.5);
}

// The KV cache's codes: int8 steps are a block's max |k| / 127 per KV head,
// fp8 e4m3 keeps 3 mantissa bits (1/16 relative). Weights stay fp32.
TEST_P(DtypeAccuracyTest, Int8KvCacheStaysCloseToFloat32) {
  const Figures f = Compare(GetParam(), {"kv int8", DType::kF32, "", kernels::CacheDtype::kInt8});
  EXPECT_GE(f.top1_agreement, 0.9);
  EXPECT_LE(f.mean_abs_dlogprob, 0.05);
  EXPECT_LE(f.max_abs_dlogprob, 0.5);
}

TEST_P(DtypeAccuracyTest, Fp8KvCacheStaysCloseToFloat32) {
  const Figures f = Compare(GetParam(), {"kv fp8", DType::kF32, "", kernels::CacheDtype::kFp8E4m3});
  EXPECT_GE(f.top1_agreement, 0.85);
  EXPECT_LE(f.mean_abs_dlogprob, 0.1);
  EXPECT_LE(f.max_abs_dlogprob, 1.0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, DtypeAccuracyTest,
    ::testing::Values(std::string(kDemoDir),
                      std::string(FOLIO_RANDOM_MODELS_DIR "/llama_hd128"),
                      std::string(FOLIO_RANDOM_MODELS_DIR "/mistral_window"),
                      std::string(FOLIO_RANDOM_MODELS_DIR "/qwen2")),
    [](const ::testing::TestParamInfo<std::string>& info) {
      return info.param.substr(info.param.find_last_of('/') + 1) == "folio-demo"
                 ? std::string("demo")
                 : info.param.substr(info.param.find_last_of('/') + 1);
    });

TEST(DtypeAccuracy, DemoModelInBfloat16IsExactlyFloat32) {
  // The demo checkpoint is bf16: storing it as bf16 loses nothing, and the
  // kernel sums in the same order, so every log-prob is bitwise the same.
  std::unique_ptr<OfflineEngine> fp32 = Engine(kDemoDir, {"f", DType::kF32, ""});
  std::unique_ptr<OfflineEngine> bf16 = Engine(kDemoDir, {"b", std::nullopt, ""});
  ASSERT_NE(fp32, nullptr);
  ASSERT_NE(bf16, nullptr);
  const auto requests = GreedyRequests(fp32->model_config().vocab_size);
  absl::StatusOr<std::vector<OfflineEngine::Result>> a = fp32->Generate(requests);
  absl::StatusOr<std::vector<OfflineEngine::Result>> b = bf16->Generate(requests);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int32_t p = 0; p < kPrompts; ++p) {
    EXPECT_EQ((*a)[p].sequences[0].token_ids, (*b)[p].sequences[0].token_ids);
    EXPECT_EQ((*a)[p].sequences[0].logprobs, (*b)[p].sequences[0].logprobs);
  }
}

}  // namespace
}  // namespace folio
