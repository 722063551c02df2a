#include "common/weight_loader.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/safetensors_writer.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::TestTensor;
using testing::WriteSafetensors;
using testing::WriteText;

using Shape = std::vector<int64_t>;

// Values exactly representable in F32, F16 and BF16 (small multiples of 1/8),
// so every dtype reads back bit-exactly.
std::vector<float> Values(size_t n, float offset = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + (static_cast<float>(i % 64) - 32.0f) * 0.125f;
  return v;
}

std::unique_ptr<WeightLoader> MustOpen(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<WeightLoader>> loader = WeightLoader::Open(dir);
  EXPECT_TRUE(loader.ok()) << loader.status();
  return loader.ok() ? *std::move(loader) : nullptr;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

class WeightLoaderDTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(WeightLoaderDTypeTest, WholeTensorRowsAndColumns) {
  const DType dtype = GetParam();
  std::string dir = testing::MakeTestDir();
  const Shape mshape = {6, 10};
  std::vector<float> m = Values(60);
  std::vector<float> vec = Values(7, 1.0f);
  WriteSafetensors(dir + "/model.safetensors",
                   {MakeTensor("model.norm.weight", dtype, {7}, vec),
                    MakeTensor("model.layers.0.mlp.up_proj.weight", dtype, mshape, m)});
  std::unique_ptr<WeightLoader> w = MustOpen(dir);
  ASSERT_NE(w, nullptr);
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  EXPECT_TRUE(w->Has(name));
  EXPECT_FALSE(w->Has("lm_head.weight"));
  ASSERT_NE(w->Find(name), nullptr);
  EXPECT_EQ(w->Find(name)->dtype, dtype);
  EXPECT_THAT(w->TensorNames(), ElementsAre(name, "model.norm.weight"));

  std::vector<float> out(60, -1.0f);
  ASSERT_TRUE(w->ReadF32(name, mshape, out.data()).ok());
  EXPECT_EQ(out, m);
  std::vector<float> vout(7);
  ASSERT_TRUE(w->ReadF32("model.norm.weight", Shape{7}, vout.data()).ok());
  EXPECT_EQ(vout, vec);

  // Rows 2..4 of the matrix.
  std::vector<float> rows(3 * 10);
  ASSERT_TRUE(w->ReadRowsF32(name, mshape, 2, 3, rows.data()).ok());
  EXPECT_EQ(rows, std::vector<float>(m.begin() + 20, m.begin() + 50));
  // Elements 3..6 of the vector.
  std::vector<float> elems(4);
  ASSERT_TRUE(w->ReadRowsF32("model.norm.weight", Shape{7}, 3, 4, elems.data()).ok());
  EXPECT_EQ(elems, std::vector<float>(vec.begin() + 3, vec.end()));
  // Columns 4..8 of the matrix, as [6][5].
  std::vector<float> cols(6 * 5);
  ASSERT_TRUE(w->ReadColsF32(name, mshape, 4, 5, cols.data()).ok());
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 5; ++c) EXPECT_EQ(cols[r * 5 + c], m[r * 10 + 4 + c]) << r << "," << c;
  }
  // Empty slices are fine and write nothing.
  EXPECT_TRUE(w->ReadRowsF32(name, mshape, 6, 0, nullptr).ok());
  EXPECT_TRUE(w->ReadColsF32(name, mshape, 10, 0, nullptr).ok());
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, WeightLoaderDTypeTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(WeightLoaderTest, ConvertsWithRounding) {
  // Values that the 16-bit formats cannot hold read back as their rounded value.
  std::string dir = testing::MakeTestDir();
  std::vector<float> v = {0.1f, 3.14159265f, -1e-6f, 70000.0f};
  WriteSafetensors(dir + "/model.safetensors", {MakeTensor("h", DType::kF16, {4}, v),
                                                MakeTensor("b", DType::kBF16, {4}, v)});
  std::unique_ptr<WeightLoader> w = MustOpen(dir);
  ASSERT_NE(w, nullptr);
  std::vector<float> out(4);
  ASSERT_TRUE(w->ReadF32("h", Shape{4}, out.data()).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], Fp16ToFloat(FloatToFp16(v[i])));
  EXPECT_TRUE(std::isinf(out[3]));
  ASSERT_TRUE(w->ReadF32("b", Shape{4}, out.data()).ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], Bf16ToFloat(FloatToBf16(v[i])));
}

// What tensor-parallel ranks do: each reads its row shard (column-parallel
// layers) or column shard (row-parallel layers); together they are the whole.
TEST(WeightLoaderTest, TensorParallelShardsReassemble) {
  std::string dir = testing::MakeTestDir();
  const Shape shape = {8, 12};
  std::vector<float> m = Values(96, 0.5f);
  WriteSafetensors(dir + "/model.safetensors", {MakeTensor("w", DType::kBF16, shape, m)});
  std::unique_ptr<WeightLoader> w = MustOpen(dir);
  ASSERT_NE(w, nullptr);
  for (int tp : {1, 2, 4}) {
    std::vector<float> by_rows, by_cols(96);
    for (int rank = 0; rank < tp; ++rank) {
      std::vector<float> part(96 / tp);
      ASSERT_TRUE(w->ReadRowsF32("w", shape, rank * 8 / tp, 8 / tp, part.data()).ok());
      by_rows.insert(by_rows.end(), part.begin(), part.end());
      const int cols = 12 / tp;
      ASSERT_TRUE(w->ReadColsF32("w", shape, rank * cols, cols, part.data()).ok());
      for (int r = 0; r < 8; ++r) {
        for (int c = 0; c < cols; ++c) by_cols[r * 12 + rank * cols + c] = part[r * cols + c];
      }
    }
    EXPECT_EQ(by_rows, m) << "tp " << tp;
    EXPECT_EQ(by_cols, m) << "tp " << tp;
  }
}

TEST(WeightLoaderTest, ErrorsNameFileTensorAndShapes) {
  std::string dir = testing::MakeTestDir();
  std::string file = dir + "/model.safetensors";
  WriteSafetensors(file, {MakeTensor("w", DType::kF32, {2, 3}, Values(6)),
                          MakeTensor("v", DType::kF32, {5}, Values(5)),
                          MakeTensor("s", DType::kF32, {}, {1.0f})});
  std::unique_ptr<WeightLoader> w = MustOpen(dir);
  ASSERT_NE(w, nullptr);
  std::vector<float> out(64);

  absl::Status s = w->ReadF32("model.layers.3.mlp.up_proj.weight", Shape{2, 3}, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Msg(s), "tensor model.layers.3.mlp.up_proj.weight not found in " + file);
  EXPECT_EQ(w->ReadRowsF32("nope", Shape{2}, 0, 1, out.data()).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(w->ReadColsF32("nope", Shape{2, 2}, 0, 1, out.data()).code(),
            absl::StatusCode::kNotFound);

  s = w->ReadF32("w", Shape{3, 2}, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Msg(s), "tensor w in " + file + " has shape [2, 3], expected [3, 2]");
  s = w->ReadF32("w", Shape{6}, out.data());
  EXPECT_THAT(Msg(s), HasSubstr("has shape [2, 3], expected [6]"));
  s = w->ReadRowsF32("w", Shape{2, 3, 1}, 0, 1, out.data());
  EXPECT_THAT(Msg(s), HasSubstr("expected [2, 3, 1]"));

  // Slices out of range.
  for (auto [begin, count] : {std::pair<int64_t, int64_t>{1, 2}, {-1, 1}, {0, -1}, {3, 0},
                              {INT64_MAX, INT64_MAX}}) {
    s = w->ReadRowsF32("w", Shape{2, 3}, begin, count, out.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << begin << " " << count;
    EXPECT_THAT(Msg(s), HasSubstr("tensor w in " + file + " with shape [2, 3]"));
  }
  s = w->ReadColsF32("w", Shape{2, 3}, 2, 2, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(Msg(s), HasSubstr("columns: begin 2 count 2 out of range for tensor w"));
  EXPECT_EQ(w->ReadRowsF32("v", Shape{5}, 4, 2, out.data()).code(),
            absl::StatusCode::kOutOfRange);

  // Columns need a 2-D tensor; rows need at least 1-D.
  s = w->ReadColsF32("v", Shape{5}, 0, 1, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("column slices need a 2-D tensor"));
  s = w->ReadRowsF32("s", Shape{}, 0, 1, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("scalar"));
  ASSERT_TRUE(w->ReadF32("s", Shape{}, out.data()).ok());
  EXPECT_EQ(out[0], 1.0f);
}

// A model sharded like Hugging Face writes it: two files and an index.
void WriteShardedModel(const std::string& dir) {
  WriteSafetensors(dir + "/model-00001-of-00002.safetensors",
                   {MakeTensor("model.embed_tokens.weight", DType::kBF16, {4, 6}, Values(24)),
                    MakeTensor("model.layers.0.self_attn.q_proj.weight", DType::kBF16, {6, 6},
                               Values(36, 1.0f))});
  WriteSafetensors(dir + "/model-00002-of-00002.safetensors",
                   {MakeTensor("model.norm.weight", DType::kF32, {6}, Values(6, 2.0f)),
                    MakeTensor("lm_head.weight", DType::kF16, {4, 6}, Values(24, 3.0f)),
                    MakeTensor("unlisted", DType::kF32, {1}, {0.0f})});
  WriteText(dir + "/model.safetensors.index.json", R"({
    "metadata": {"total_size": 176},
    "weight_map": {
      "lm_head.weight": "model-00002-of-00002.safetensors",
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.layers.0.self_attn.q_proj.weight": "model-00001-of-00002.safetensors",
      "model.norm.weight": "model-00002-of-00002.safetensors"
    }})");
}

TEST(WeightLoaderTest, ShardedDirectory) {
  std::string dir = testing::MakeTestDir();
  WriteShardedModel(dir);
  std::unique_ptr<WeightLoader> w = MustOpen(dir);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->TensorNames(),
              ElementsAre("lm_head.weight", "model.embed_tokens.weight",
                          "model.layers.0.self_attn.q_proj.weight", "model.norm.weight"));
  EXPECT_FALSE(w->Has("unlisted"));  // the index is the authority
  std::vector<float> out(36);
  ASSERT_TRUE(w->ReadF32("model.norm.weight", Shape{6}, out.data()).ok());
  EXPECT_THAT(std::vector<float>(out.begin(), out.begin() + 6), ElementsAreArray(Values(6, 2.0f)));
  ASSERT_TRUE(w->ReadRowsF32("lm_head.weight", Shape{4, 6}, 1, 2, out.data()).ok());
  std::vector<float> lm = Values(24, 3.0f);
  EXPECT_THAT(std::vector<float>(out.begin(), out.begin() + 12),
              ElementsAreArray(std::vector<float>(lm.begin() + 6, lm.begin() + 18)));
  ASSERT_TRUE(
      w->ReadColsF32("model.layers.0.self_attn.q_proj.weight", Shape{6, 6}, 3, 3, out.data())
          .ok());
  std::vector<float> q = Values(36, 1.0f);
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(out[r * 3 + c], q[r * 6 + 3 + c]);
  }

  // Errors name the index (not found) or the shard (shape).
  absl::Status s = w->ReadF32("model.layers.3.mlp.up_proj.weight", Shape{1}, out.data());
  EXPECT_EQ(Msg(s), "tensor model.layers.3.mlp.up_proj.weight not found in " + dir +
                        "/model.safetensors.index.json");
  s = w->ReadF32("model.norm.weight", Shape{7}, out.data());
  EXPECT_THAT(Msg(s), HasSubstr(dir + "/model-00002-of-00002.safetensors has shape [6]"));
}

TEST(WeightLoaderTest, SingleFileWinsOverIndex) {
  std::string dir = testing::MakeTestDir();
  WriteShardedModel(dir);
  WriteSafetensors(dir + "/model.safetensors", {MakeTensor("only", DType::kF32, {1}, {5.0f})});
  std::unique_ptr<WeightLoader> w = MustOpen(dir);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->TensorNames(), ElementsAre("only"));
}

TEST(WeightLoaderTest, MissingDirectoryOrFiles) {
  std::string dir = testing::MakeTestDir();
  absl::StatusOr<std::unique_ptr<WeightLoader>> w = WeightLoader::Open(dir + "/absent");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Msg(w.status()), "model directory " + dir + "/absent does not exist");

  w = WeightLoader::Open(dir);  // empty directory
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Msg(w.status()),
            "no model.safetensors or model.safetensors.index.json in " + dir);
}

TEST(WeightLoaderTest, MissingShard) {
  std::string dir = testing::MakeTestDir();
  WriteShardedModel(dir);
  std::filesystem::remove(dir + "/model-00002-of-00002.safetensors");
  absl::StatusOr<std::unique_ptr<WeightLoader>> w = WeightLoader::Open(dir);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(w.status()), HasSubstr(dir + "/model-00002-of-00002.safetensors"));
  EXPECT_THAT(Msg(w.status()), HasSubstr("listed in " + dir + "/model.safetensors.index.json"));
}

TEST(WeightLoaderTest, CorruptShardNamesTheShard) {
  std::string dir = testing::MakeTestDir();
  WriteShardedModel(dir);
  testing::WriteRaw(dir + "/model-00001-of-00002.safetensors", "{not json", "");
  absl::StatusOr<std::unique_ptr<WeightLoader>> w = WeightLoader::Open(dir);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Msg(w.status()), HasSubstr(dir + "/model-00001-of-00002.safetensors"));
  EXPECT_THAT(Msg(w.status()), HasSubstr("invalid JSON"));
}

TEST(WeightLoaderTest, BadIndex) {
  struct Case {
    const char* index;
    const char* contains;
  };
  const Case cases[] = {
      {"{\"weight_map\": ", "invalid JSON"},
      {"[]", "expected a JSON object"},
      {R"({"metadata": {}})", "missing or non-object 'weight_map'"},
      {R"({"weight_map": {"a": 3}})", "weight_map entry for a is not a file name"},
      {R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})",
       "is not a plain file name"},
      {R"({"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors"}})",
       "maps tensor lm_head.weight to "},
  };
  std::string dir = testing::MakeTestDir();
  WriteShardedModel(dir);
  const std::string index = dir + "/model.safetensors.index.json";
  for (const Case& c : cases) {
    WriteText(index, c.index);
    absl::StatusOr<std::unique_ptr<WeightLoader>> w = WeightLoader::Open(dir);
    ASSERT_FALSE(w.ok()) << c.index;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kDataLoss) << c.index;
    EXPECT_THAT(Msg(w.status()), HasSubstr(index)) << c.index;
    EXPECT_THAT(Msg(w.status()), HasSubstr(c.contains)) << c.index;
  }
}

}  // namespace
}  // namespace folio
