#include "common/weight_loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/dtype.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using json = nlohmann::json;

constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string ShapeString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Converts `count` elements starting at element `first` of `info` to float32.
void ConvertToF32(const TensorInfo& info, size_t first, size_t count, float* out) {
  if (count == 0) return;  // `out` may be null for an empty slice
  const uint8_t* src = info.data + first * DTypeSize(info.dtype);
  switch (info.dtype) {
    case DType::kF32:
      std::memcpy(out, src, count * sizeof(float));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = Bf16ToFloat(h);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = Fp16ToFloat(h);
      }
      return;
  }
  FOLIO_CHECK(false);
}

// weight_map of an index file: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ParseIndex(const std::string& index_path) {
  absl::StatusOr<std::string> text = ReadTextFile(index_path);
  if (!text.ok()) return text.status();
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(absl::StrCat(index_path, ": ", std::string(why)));
  };
  json root;
  try {
    root = json::parse(*text);
  } catch (const json::exception& e) {
    return corrupt(absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!root.is_object()) return corrupt("expected a JSON object");
  auto wm = root.find("weight_map");
  if (wm == root.end() || !wm->is_object()) return corrupt("missing or non-object 'weight_map'");
  std::map<std::string, std::string> map;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      return corrupt(absl::StrCat("weight_map entry for ", it.key(), " is not a file name"));
    }
    std::string shard = it.value().get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") {
      return corrupt(absl::StrCat("weight_map entry for ", it.key(), ": '", shard,
                                  "' is not a plain file name in the model directory"));
    }
    map.emplace(it.key(), std::move(shard));
  }
  return map;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WeightLoader>> WeightLoader::Open(const std::string& model_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model directory ", model_dir, " does not exist"));
  }
  std::unique_ptr<WeightLoader> loader(new WeightLoader(model_dir));
  const std::string single = JoinPath(model_dir, kSingleFile);
  const std::string index = JoinPath(model_dir, kIndexFile);

  if (IsRegularFile(single)) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(single);
    if (!file.ok()) return file.status();
    const SafetensorsFile* f = file->get();
    for (const std::string& name : f->TensorNames()) {
      loader->tensors_.emplace(name, Entry{f->Find(name), f});
    }
    loader->files_.push_back(*std::move(file));
    loader->source_ = single;
    return loader;
  }

  if (!IsRegularFile(index)) {
    return absl::NotFoundError(absl::StrCat("no ", kSingleFile, " or ", kIndexFile, " in ",
                                            model_dir));
  }
  absl::StatusOr<std::map<std::string, std::string>> weight_map = ParseIndex(index);
  if (!weight_map.ok()) return weight_map.status();
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [name, shard] : *weight_map) {
    auto [it, inserted] = shards.emplace(shard, nullptr);
    if (inserted) {
      const std::string shard_path = JoinPath(model_dir, shard);
      absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(shard_path);
      if (!file.ok()) {
        return absl::Status(file.status().code(),
                            absl::StrCat(file.status().message(), " (listed in ", index, ")"));
      }
      it->second = file->get();
      loader->files_.push_back(*std::move(file));
    }
    const TensorInfo* info = it->second->Find(name);
    if (info == nullptr) {
      return absl::DataLossError(absl::StrCat(index, " maps tensor ", name, " to ",
                                              it->second->path(), ", which has no such tensor"));
    }
    loader->tensors_.emplace(name, Entry{info, it->second});
  }
  loader->source_ = index;
  return loader;
}

const TensorInfo* WeightLoader::Find(std::string_view name) const {
  auto it = tensors_.find(std::string(name));
  return it == tensors_.end() ? nullptr : it->second.info;
}

std::vector<std::string> WeightLoader::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, entry] : tensors_) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

absl::StatusOr<const WeightLoader::Entry*> WeightLoader::Lookup(
    std::string_view name, std::span<const int64_t> shape) const {
  auto it = tensors_.find(std::string(name));
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat("tensor ", std::string(name), " not found in ",
                                            source_));
  }
  const Entry& e = it->second;
  if (!std::equal(shape.begin(), shape.end(), e.info->shape.begin(), e.info->shape.end())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", std::string(name), " in ", e.file->path(), " has shape ",
        ShapeString(e.info->shape), ", expected ", ShapeString(shape)));
  }
  return &e;
}

absl::Status WeightLoader::ReadF32(std::string_view name, std::span<const int64_t> shape,
                                   float* out) const {
  absl::StatusOr<const Entry*> e = Lookup(name, shape);
  if (!e.ok()) return e.status();
  const TensorInfo& info = *(*e)->info;
  ConvertToF32(info, 0, static_cast<size_t>(info.NumElements()), out);
  return absl::OkStatus();
}

absl::Status WeightLoader::ReadRowsF32(std::string_view name, std::span<const int64_t> shape,
                                       int64_t row_begin, int64_t row_count, float* out) const {
  absl::StatusOr<const Entry*> e = Lookup(name, shape);
  if (!e.ok()) return e.status();
  const TensorInfo& info = *(*e)->info;
  if (info.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", std::string(name), " in ",
                                                   (*e)->file->path(),
                                                   " is a scalar; it has no rows"));
  }
  const int64_t rows = info.shape[0];
  if (row_begin < 0 || row_count < 0 || row_begin > rows || row_count > rows - row_begin) {
    return absl::OutOfRangeError(absl::StrCat(
        "rows: begin ", row_begin, " count ", row_count, " out of range for tensor ",
        std::string(name), " in ", (*e)->file->path(), " with shape ", ShapeString(info.shape)));
  }
  int64_t row_elems = 1;
  for (size_t d = 1; d < info.shape.size(); ++d) row_elems *= info.shape[d];
  ConvertToF32(info, static_cast<size_t>(row_begin * row_elems),
               static_cast<size_t>(row_count * row_elems), out);
  return absl::OkStatus();
}

absl::Status WeightLoader::ReadColsF32(std::string_view name, std::span<const int64_t> shape,
                                       int64_t col_begin, int64_t col_count, float* out) const {
  absl::StatusOr<const Entry*> e = Lookup(name, shape);
  if (!e.ok()) return e.status();
  const TensorInfo& info = *(*e)->info;
  if (info.shape.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", std::string(name), " in ", (*e)->file->path(), " has shape ",
        ShapeString(info.shape), "; column slices need a 2-D tensor"));
  }
  const int64_t rows = info.shape[0];
  const int64_t cols = info.shape[1];
  if (col_begin < 0 || col_count < 0 || col_begin > cols || col_count > cols - col_begin) {
    return absl::OutOfRangeError(absl::StrCat(
        "columns: begin ", col_begin, " count ", col_count, " out of range for tensor ",
        std::string(name), " in ", (*e)->file->path(), " with shape ", ShapeString(info.shape)));
  }
  for (int64_t r = 0; r < rows; ++r) {
    ConvertToF32(info, static_cast<size_t>(r * cols + col_begin), static_cast<size_t>(col_count),
                 out + r * col_count);
  }
  return absl::OkStatus();
}

}  // namespace folio
