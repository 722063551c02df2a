// ShardShape (tensor-parallel head / MLP split, KV-head replication) and
// ModelWeights::Load on the demo model: shapes, rank slices equal to the
// matching parts of the full weights, and errors naming the missing or
// mis-shaped tensor.

#include "worker/model_weights.h"

#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "common/check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using ::testing::HasSubstr;

const std::string kDemoDir = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";

ModelConfig Config(int32_t heads, int32_t kv_heads, int32_t intermediate) {
  ModelConfig c;
  c.hidden_size = 64 * heads;
  c.intermediate_size = intermediate;
  c.num_layers = 2;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 64;
  c.vocab_size = 100;
  c.max_position_embeddings = 128;
  return c;
}

ShardShape MakeOk(const ModelConfig& c, int32_t rank, int32_t world) {
  absl::StatusOr<ShardShape> s = ShardShape::Make(c, ShardSpec{rank, world});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : ShardShape{};
}

TEST(ShardShapeTest, MhaSplitsHeadsKvHeadsAndMlp) {
  const ModelConfig c = Config(8, 8, 64);
  for (int32_t world : {1, 2, 4}) {
    for (int32_t rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " of " << world);
      const ShardShape s = MakeOk(c, rank, world);
      EXPECT_EQ(s.num_heads, 8 / world);
      EXPECT_EQ(s.first_head, rank * 8 / world);
      EXPECT_EQ(s.num_kv_heads, 8 / world);
      EXPECT_EQ(s.first_kv_head, rank * 8 / world);
      EXPECT_EQ(s.intermediate, 64 / world);
      EXPECT_EQ(s.first_intermediate, rank * 64 / world);
    }
  }
}

TEST(ShardShapeTest, GqaSplitsKvHeadsWhileThereAreEnough) {
  const ModelConfig c = Config(8, 4, 48);
  for (int32_t world : {1, 2, 4}) {
    for (int32_t rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " of " << world);
      const ShardShape s = MakeOk(c, rank, world);
      EXPECT_EQ(s.num_heads, 8 / world);
      EXPECT_EQ(s.num_kv_heads, 4 / world);
      EXPECT_EQ(s.first_kv_head, rank * 4 / world);
      // The rank's query heads use exactly its KV heads (2 query heads per KV head).
      EXPECT_EQ(s.first_head / 2, s.first_kv_head);
      EXPECT_EQ((s.first_head + s.num_heads - 1) / 2, s.first_kv_head + s.num_kv_heads - 1);
      EXPECT_EQ(s.intermediate, 48 / world);
    }
  }
}

TEST(ShardShapeTest, FewerKvHeadsThanRanksReplicates) {
  // 8 query heads, 2 KV heads on 4 ranks: ranks 0-1 hold KV head 0, ranks 2-3 KV head 1.
  const ModelConfig gqa = Config(8, 2, 64);
  for (int32_t rank = 0; rank < 4; ++rank) {
    const ShardShape s = MakeOk(gqa, rank, 4);
    EXPECT_EQ(s.num_heads, 2);
    EXPECT_EQ(s.first_head, 2 * rank);
    EXPECT_EQ(s.num_kv_heads, 1);
    EXPECT_EQ(s.first_kv_head, rank / 2) << "rank " << rank;
    EXPECT_EQ(s.first_head / 4, s.first_kv_head);  // 4 query heads per KV head
  }
  // Multi-query: every rank holds the only KV head.
  const ModelConfig mqa = Config(4, 1, 64);
  for (int32_t world : {2, 4}) {
    for (int32_t rank = 0; rank < world; ++rank) {
      const ShardShape s = MakeOk(mqa, rank, world);
      EXPECT_EQ(s.num_kv_heads, 1);
      EXPECT_EQ(s.first_kv_head, 0);
    }
  }
}

TEST(ShardShapeTest, BadDivisibilityAndRanksAreErrors) {
  auto error = [](const ModelConfig& c, int32_t rank, int32_t world) {
    absl::StatusOr<ShardShape> s = ShardShape::Make(c, ShardSpec{rank, world});
    EXPECT_FALSE(s.ok()) << "rank " << rank << " of " << world;
    if (s.ok()) return std::string();
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  };
  EXPECT_THAT(error(Config(8, 8, 64), 0, 3), HasSubstr("num_attention_heads"));
  EXPECT_THAT(error(Config(8, 8, 60), 0, 8), HasSubstr("intermediate_size"));
  EXPECT_THAT(error(Config(12, 6, 48), 0, 4), HasSubstr("num_key_value_heads"));
  EXPECT_THAT(error(Config(6, 2, 48), 0, 3), HasSubstr("num_key_value_heads"));
  EXPECT_THAT(error(Config(8, 8, 64), 2, 2), HasSubstr("rank"));
  EXPECT_THAT(error(Config(8, 8, 64), -1, 2), HasSubstr("rank"));
  error(Config(8, 8, 64), 0, 0);
}

bool AllFinite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

TEST(ModelWeightsTest, LoadsTheDemoModelWithTheConfigShapes) {
  absl::StatusOr<ModelConfig> config = ModelConfig::LoadFromDirectory(kDemoDir);
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& c = *config;
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(kDemoDir, ShardSpec{});
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelWeights& m = **w;
  const size_t d = c.hidden_size, hd = c.head_dim, inter = c.intermediate_size;
  EXPECT_EQ(m.shape.num_heads, c.num_heads);
  EXPECT_EQ(m.shape.num_kv_heads, c.num_kv_heads);
  EXPECT_EQ(m.embed.size(), size_t(c.vocab_size) * d);
  EXPECT_EQ(m.final_norm.size(), d);
  EXPECT_EQ(m.lm_head.empty(), c.tie_word_embeddings);
  if (!c.tie_word_embeddings) {
    EXPECT_EQ(m.lm_head.size(), size_t(c.vocab_size) * d);
  }
  EXPECT_EQ(m.lm_head_data(), c.tie_word_embeddings ? m.embed.data() : m.lm_head.data());
  ASSERT_EQ(m.layers.size(), size_t(c.num_layers));
  for (const LayerWeights& L : m.layers) {
    const size_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * hd;
    EXPECT_EQ(L.input_norm.size(), d);
    EXPECT_EQ(L.qkv.size(), qkv_rows * d);
    EXPECT_EQ(L.qkv_bias.size(), c.qkv_bias ? qkv_rows : 0);
    EXPECT_EQ(L.o_proj.size(), d * c.num_heads * hd);
    EXPECT_EQ(L.post_attention_norm.size(), d);
    EXPECT_EQ(L.gate_up.size(), 2 * inter * d);
    EXPECT_EQ(L.down_proj.size(), d * inter);
    EXPECT_TRUE(AllFinite(L.qkv) && AllFinite(L.o_proj) && AllFinite(L.gate_up) && AllFinite(L.down_proj));
  }
  EXPECT_TRUE(AllFinite(m.embed));
  EXPECT_NE(m.embed, std::vector<float>(m.embed.size(), 0.0f));
}

// Rows [begin, begin + count) of a row-major [rows][cols] matrix stored at `m + offset`.
std::vector<float> RowSlice(const std::vector<float>& m, size_t offset, size_t cols, size_t begin,
                            size_t count) {
  auto first = m.begin() + offset + begin * cols;
  return std::vector<float>(first, first + count * cols);
}

std::vector<float> ColSlice(const std::vector<float>& m, size_t rows, size_t cols, size_t begin,
                            size_t count) {
  std::vector<float> out;
  for (size_t r = 0; r < rows; ++r) {
    out.insert(out.end(), m.begin() + r * cols + begin, m.begin() + r * cols + begin + count);
  }
  return out;
}

TEST(ModelWeightsTest, RankSlicesAreThePartsOfTheFullWeights) {
  absl::StatusOr<std::unique_ptr<ModelWeights>> full = ModelWeights::Load(kDemoDir, ShardSpec{});
  ASSERT_TRUE(full.ok()) << full.status();
  const ModelConfig& c = (*full)->config;
  const size_t d = c.hidden_size, hd = c.head_dim, inter = c.intermediate_size;
  const size_t q_rows = c.num_heads * hd, kv_rows = c.num_kv_heads * hd;
  int tested = 0;
  for (int32_t world : {2, 4}) {
    if (!ShardShape::Make(c, ShardSpec{0, world}).ok()) continue;  // the demo's shape may not split
    for (int32_t rank = 0; rank < world; ++rank) {
      SCOPED_TRACE(::testing::Message() << "rank " << rank << " of " << world);
      absl::StatusOr<std::unique_ptr<ModelWeights>> part = ModelWeights::Load(kDemoDir, ShardSpec{rank, world});
      ASSERT_TRUE(part.ok()) << part.status();
      const ShardShape& s = (*part)->shape;
      EXPECT_TRUE((*part)->embed == RowSlice((*full)->embed, 0, d, s.vocab_begin, s.vocab_count));
      for (int32_t l = 0; l < c.num_layers; ++l) {
        const LayerWeights& F = (*full)->layers[l];
        const LayerWeights& P = (*part)->layers[l];
        const size_t rq = s.num_heads * hd, rkv = s.num_kv_heads * hd;
        ASSERT_EQ(P.qkv.size(), (rq + 2 * rkv) * d);
        std::vector<float> expect = RowSlice(F.qkv, 0, d, s.first_head * hd, rq);
        for (size_t base : {q_rows, q_rows + kv_rows}) {
          std::vector<float> kv = RowSlice(F.qkv, base * d, d, s.first_kv_head * hd, rkv);
          expect.insert(expect.end(), kv.begin(), kv.end());
        }
        EXPECT_TRUE(P.qkv == expect) << "layer " << l << " qkv";
        EXPECT_TRUE(P.o_proj == ColSlice(F.o_proj, d, q_rows, s.first_head * hd, rq)) << "layer " << l;
        std::vector<float> gate_up = RowSlice(F.gate_up, 0, d, s.first_intermediate, s.intermediate);
        std::vector<float> up = RowSlice(F.gate_up, inter * d, d, s.first_intermediate, s.intermediate);
        gate_up.insert(gate_up.end(), up.begin(), up.end());
        EXPECT_TRUE(P.gate_up == gate_up) << "layer " << l;
        EXPECT_TRUE(P.down_proj == ColSlice(F.down_proj, d, inter, s.first_intermediate, s.intermediate))
            << "layer " << l;
        EXPECT_EQ(P.input_norm, F.input_norm);
      }
      ++tested;
    }
  }
  if (tested == 0) GTEST_SKIP() << "the demo model does not split over 2 or 4 ranks";
}

// A copy of the demo model whose config.json is edited by `edit`; the weights
// and tokenizer are symlinked. Removed on destruction.
class BrokenModelDir {
 public:
  explicit BrokenModelDir(const std::function<void(nlohmann::json&)>& edit) {
    char tmpl[] = "/tmp/folio_model_weights_test.XXXXXX";
    FOLIO_CHECK(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    namespace fs = std::filesystem;
    for (const char* f : {"model.safetensors", "tokenizer.json"}) {
      fs::create_symlink(fs::path(kDemoDir) / f, fs::path(dir_) / f);
    }
    std::ifstream in(kDemoDir + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    edit(config);
    std::ofstream(dir_ + "/config.json") << config.dump(2);
  }
  ~BrokenModelDir() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

TEST(ModelWeightsTest, MissingLayerTensorIsNamed) {
  int32_t layers = 0;
  BrokenModelDir dir([&](nlohmann::json& c) {
    layers = c["num_hidden_layers"].get<int32_t>();
    c["num_hidden_layers"] = layers + 1;
  });
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir.path(), ShardSpec{});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("model.layers." + std::to_string(layers) + "."));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("not found"));
}

TEST(ModelWeightsTest, MissingLmHeadIsNamedWhenUntied) {
  bool was_tied = false;
  BrokenModelDir dir([&](nlohmann::json& c) {
    was_tied = c.value("tie_word_embeddings", false);
    c["tie_word_embeddings"] = false;
  });
  if (!was_tied) GTEST_SKIP() << "the demo model ships its own lm_head";
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir.path(), ShardSpec{});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("lm_head.weight"));
}

TEST(ModelWeightsTest, WrongShapeIsNamed) {
  BrokenModelDir dir([](nlohmann::json& c) {
    c["intermediate_size"] = c["intermediate_size"].get<int32_t>() + 8;
  });
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir.path(), ShardSpec{});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("model.layers.0.mlp.gate_proj.weight"));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("shape"));
}

TEST(ModelWeightsTest, UnsplittableShardIsRefusedBeforeLoading) {
  absl::StatusOr<ModelConfig> c = ModelConfig::LoadFromDirectory(kDemoDir);
  ASSERT_TRUE(c.ok());
  const int32_t world = c->num_heads + 1;  // never divides num_heads
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(kDemoDir, ShardSpec{0, world});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ModelWeightsTest, MissingDirectoryIsAnError) {
  absl::StatusOr<std::unique_ptr<ModelWeights>> w =
      ModelWeights::Load("/nonexistent/folio-model", ShardSpec{});
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("/nonexistent/folio-model"));
}

}  // namespace
}  // namespace folio
