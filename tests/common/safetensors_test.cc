#include "common/safetensors.h"

#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/safetensors_writer.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::TestTensor;
using testing::WriteRaw;
using testing::WriteSafetensors;

std::vector<float> Iota(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (static_cast<float>(i) - n / 2.0f) * scale;
  return v;
}

TEST(SafetensorsTest, ReadsEveryDTypeBackExactly) {
  std::string path = testing::MakeTestDir() + "/model.safetensors";
  std::vector<TestTensor> tensors = {
      MakeTensor("a.f32", DType::kF32, {2, 3}, {1.5f, -2.25f, 3e-8f, 1e30f, -0.0f, 7.0f}),
      MakeTensor("b.f16", DType::kF16, {3}, {0.5f, -65504.0f, 5.960464477539063e-08f}),
      MakeTensor("c.bf16", DType::kBF16, {2, 2}, {1.0f, -3.140625f, 1e30f, 0.0078125f}),
  };
  WriteSafetensors(path, tensors);

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->path(), path);
  EXPECT_THAT((*file)->TensorNames(), ElementsAre("a.f32", "b.f16", "c.bf16"));
  const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16};
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo* t = (*file)->Find(tensors[i].name);
    ASSERT_NE(t, nullptr) << tensors[i].name;
    EXPECT_EQ(t->name, tensors[i].name);
    EXPECT_EQ(t->dtype, dtypes[i]);
    EXPECT_EQ(t->shape, tensors[i].shape);
    EXPECT_EQ(t->nbytes, tensors[i].bytes.size());
    EXPECT_EQ(t->NumElements() * static_cast<int64_t>(DTypeSize(t->dtype)),
              static_cast<int64_t>(t->nbytes));
    EXPECT_EQ(std::memcmp(t->data, tensors[i].bytes.data(), t->nbytes), 0) << tensors[i].name;
  }
  const TensorInfo* c = (*file)->Find("c.bf16");
  uint16_t h;
  std::memcpy(&h, c->data + 2, 2);
  EXPECT_EQ(Bf16ToFloat(h), -3.140625f);
  EXPECT_EQ((*file)->Find("missing"), nullptr);
  EXPECT_EQ((*file)->Find("__metadata__"), nullptr);
}

TEST(SafetensorsTest, ScalarsEmptyTensorsUnpaddedHeaderAndNoMetadata) {
  std::string path = testing::MakeTestDir() + "/x.safetensors";
  std::vector<TestTensor> tensors = {
      MakeTensor("scalar", DType::kF32, {}, {42.0f}),
      MakeTensor("empty", DType::kF16, {0, 4}, {}),
      MakeTensor("vec", DType::kF32, {5}, Iota(5, 1.0f)),
  };
  nlohmann::json header = testing::HeaderFor(tensors);
  header.erase("__metadata__");
  std::string data;
  for (const TestTensor& t : tensors) data += t.bytes;
  WriteRaw(path, header.dump(), data);  // header length not a multiple of 8: data unaligned

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo* s = (*file)->Find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->NumElements(), 1);
  float v;
  std::memcpy(&v, s->data, 4);
  EXPECT_EQ(v, 42.0f);
  const TensorInfo* e = (*file)->Find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->nbytes, 0u);
  EXPECT_EQ(e->NumElements(), 0);
  ASSERT_NE((*file)->Find("vec"), nullptr);
  EXPECT_EQ(std::memcmp((*file)->Find("vec")->data, tensors[2].bytes.data(), 20), 0);
}

TEST(SafetensorsTest, MissingFileNamesThePath) {
  std::string path = testing::MakeTestDir() + "/absent.safetensors";
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path));
}

TEST(SafetensorsTest, DirectoryIsNotAFile) {
  std::string dir = testing::MakeTestDir();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(dir);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(dir));
}

// Corrupt files: each is rejected with a status naming the file and the problem.
struct CorruptCase {
  const char* label;
  absl::StatusCode code;
  const char* contains;
};

class SafetensorsCorruptTest : public ::testing::TestWithParam<CorruptCase> {
 protected:
  // Writes the corrupt file for this case; returns its path.
  std::string WriteCase() {
    std::string path = testing::MakeTestDir() + "/bad.safetensors";
    const std::string label = GetParam().label;
    std::vector<TestTensor> good = {MakeTensor("w", DType::kF32, {2, 2}, Iota(4, 1.0f)),
                                    MakeTensor("b", DType::kBF16, {4}, Iota(4, 0.5f))};
    std::string data = good[0].bytes + good[1].bytes;  // 16 + 8 bytes
    nlohmann::json h = testing::HeaderFor(good);
    if (label == "empty_file") {
      testing::WriteText(path, "");
    } else if (label == "short_file") {
      testing::WriteText(path, std::string("\x05\x00\x00", 3));
    } else if (label == "truncated_data") {
      WriteRaw(path, h.dump(), data.substr(0, 20));
    } else if (label == "truncated_header") {
      std::string header = h.dump();
      WriteRaw(path, header.substr(0, header.size() / 2), "", header.size());
    } else if (label == "header_length_too_large") {
      WriteRaw(path, h.dump(), data, uint64_t{1} << 40);
    } else if (label == "header_length_huge") {
      WriteRaw(path, h.dump(), data, ~uint64_t{0});
    } else if (label == "bad_json") {
      WriteRaw(path, "{\"w\": {\"dtype\": \"F32\", ", data);
    } else if (label == "header_not_object") {
      WriteRaw(path, "[1, 2, 3]", data);
    } else if (label == "entry_not_object") {
      h["w"] = 7;
      WriteRaw(path, h.dump(), data);
    } else if (label == "offsets_outside_data") {
      h["b"]["data_offsets"] = {16, 32};
      h["b"]["shape"] = {8};
      WriteRaw(path, h.dump(), data);
    } else if (label == "offsets_reversed") {
      h["w"]["data_offsets"] = {16, 0};
      WriteRaw(path, h.dump(), data);
    } else if (label == "offsets_negative") {
      h["w"]["data_offsets"] = {-16, 0};
      WriteRaw(path, h.dump(), data);
    } else if (label == "offsets_wrong_arity") {
      h["w"]["data_offsets"] = {0};
      WriteRaw(path, h.dump(), data);
    } else if (label == "overlapping") {
      h["b"]["data_offsets"] = {12, 20};  // inside w's [0, 16)
      WriteRaw(path, h.dump(), data);
    } else if (label == "unknown_dtype") {
      h["w"]["dtype"] = "Q4_K";
      WriteRaw(path, h.dump(), data);
    } else if (label == "unsupported_dtype") {
      h["b"]["dtype"] = "I16";
      WriteRaw(path, h.dump(), data);
    } else if (label == "missing_dtype") {
      h["w"].erase("dtype");
      WriteRaw(path, h.dump(), data);
    } else if (label == "shape_mismatch") {
      h["w"]["shape"] = {2, 3};  // 24 bytes, offsets span 16
      WriteRaw(path, h.dump(), data);
    } else if (label == "shape_negative") {
      h["w"]["shape"] = {-2, -2};
      WriteRaw(path, h.dump(), data);
    } else if (label == "shape_not_list") {
      h["w"]["shape"] = "2x2";
      WriteRaw(path, h.dump(), data);
    } else if (label == "shape_overflow") {
      h["w"]["shape"] = {uint64_t{1} << 40, uint64_t{1} << 40};
      WriteRaw(path, h.dump(), data);
    } else {
      ADD_FAILURE() << "unknown case " << label;
    }
    return path;
  }
};

TEST_P(SafetensorsCorruptTest, RejectedWithClearError) {
  std::string path = WriteCase();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), GetParam().code) << file.status();
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(GetParam().contains));
}

constexpr absl::StatusCode kDataLoss = absl::StatusCode::kDataLoss;

INSTANTIATE_TEST_SUITE_P(
    All, SafetensorsCorruptTest,
    ::testing::Values(
        CorruptCase{"empty_file", kDataLoss, "0 bytes, shorter than the 8-byte header length"},
        CorruptCase{"short_file", kDataLoss, "3 bytes"},
        CorruptCase{"truncated_data", kDataLoss, "tensor b: data_offsets [16, 24) outside"},
        CorruptCase{"truncated_header", kDataLoss, "header length"},
        CorruptCase{"header_length_too_large", kDataLoss, "header length 1099511627776 exceeds"},
        CorruptCase{"header_length_huge", kDataLoss, "header length 18446744073709551615"},
        CorruptCase{"bad_json", kDataLoss, "invalid JSON"},
        CorruptCase{"header_not_object", kDataLoss, "not a JSON object"},
        CorruptCase{"entry_not_object", kDataLoss, "tensor w: expected an object"},
        CorruptCase{"offsets_outside_data", kDataLoss, "tensor b: data_offsets [16, 32) outside"},
        CorruptCase{"offsets_reversed", kDataLoss, "tensor w: data_offsets [16, 0)"},
        CorruptCase{"offsets_negative", kDataLoss, "tensor w: data_offsets must be"},
        CorruptCase{"offsets_wrong_arity", kDataLoss, "tensor w: data_offsets must be"},
        CorruptCase{"overlapping", kDataLoss, "tensors w [0, 16) and b [12, 20) overlap"},
        CorruptCase{"unknown_dtype", absl::StatusCode::kInvalidArgument,
                    "tensor w has unsupported dtype 'Q4_K'"},
        CorruptCase{"unsupported_dtype", absl::StatusCode::kInvalidArgument,
                    "tensor b has unsupported dtype 'I16'"},
        CorruptCase{"missing_dtype", kDataLoss, "tensor w: missing or non-string dtype"},
        CorruptCase{"shape_mismatch", kDataLoss,
                    "tensor w: shape [2, 3] of F32 needs 6 elements x 4 bytes but data_offsets "
                    "span 16 bytes"},
        CorruptCase{"shape_negative", kDataLoss, "tensor w: shape entries must be non-negative"},
        CorruptCase{"shape_not_list", kDataLoss, "tensor w: missing or non-list shape"},
        CorruptCase{"shape_overflow", kDataLoss, "tensor w: shape overflows"}),
    [](const ::testing::TestParamInfo<CorruptCase>& info) { return info.param.label; });

}  // namespace
}  // namespace folio
