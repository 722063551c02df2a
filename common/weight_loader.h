#ifndef FOLIO_COMMON_WEIGHT_LOADER_H_
#define FOLIO_COMMON_WEIGHT_LOADER_H_

// The weights of a Hugging Face model directory: `model.safetensors`, or the
// shards that `model.safetensors.index.json` lists in its "weight_map" (the
// single file wins when both exist, as in transformers). All files are
// memory-mapped; the Read* calls convert to float32 while copying and touch
// only the bytes of the requested slice, so a tensor-parallel rank that reads
// its rows or columns pages in only those.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/safetensors.h"

namespace folio {

// Thread-safe: immutable after Open; any number of threads may read at once.
class WeightLoader {
 public:
  // Maps every file. NOT_FOUND naming the directory when it does not exist or
  // holds neither model.safetensors nor model.safetensors.index.json, and
  // naming the shard when a listed shard is missing; DATA_LOSS naming the
  // index when it is malformed or maps a tensor to a shard that lacks it;
  // otherwise SafetensorsFile::Open's errors.
  static absl::StatusOr<std::unique_ptr<WeightLoader>> Open(const std::string& model_dir);

  WeightLoader(const WeightLoader&) = delete;
  WeightLoader& operator=(const WeightLoader&) = delete;

  bool Has(std::string_view name) const { return Find(name) != nullptr; }
  // nullptr if absent. Lives as long as this loader.
  const TensorInfo* Find(std::string_view name) const;
  // Every tensor name, sorted.
  std::vector<std::string> TensorNames() const;
  const std::string& model_dir() const { return model_dir_; }

  // The whole tensor, converted to float32, into `out` (product(shape)
  // floats). `shape` must equal the stored shape exactly.
  //   NOT_FOUND: "tensor <name> not found in <dir>/model.safetensors" (or the index);
  //   INVALID_ARGUMENT: "tensor <name> in <file> has shape [a, b], expected [c, d]".
  absl::Status ReadF32(std::string_view name, std::span<const int64_t> shape, float* out) const;

  // Rows [row_begin, row_begin + row_count) of the first dimension, each row
  // being everything after it (the elements of a 1-D tensor; whole rows of a
  // 2-D one), into `out` row-major: row_count * product(shape[1:]) floats.
  // `shape` is the full stored shape. OUT_OF_RANGE when the range does not
  // fit; INVALID_ARGUMENT for a scalar.
  absl::Status ReadRowsF32(std::string_view name, std::span<const int64_t> shape,
                           int64_t row_begin, int64_t row_count, float* out) const;

  // Columns [col_begin, col_begin + col_count) of a 2-D tensor into `out`
  // as [rows][col_count]. `shape` is the full stored shape. OUT_OF_RANGE when
  // the range does not fit; INVALID_ARGUMENT when the tensor is not 2-D.
  absl::Status ReadColsF32(std::string_view name, std::span<const int64_t> shape,
                           int64_t col_begin, int64_t col_count, float* out) const;

 private:
  struct Entry {
    const TensorInfo* info;
    const SafetensorsFile* file;
  };

  explicit WeightLoader(std::string model_dir) : model_dir_(std::move(model_dir)) {}
  // The entry for `name` if its shape equals `shape`, else the error.
  absl::StatusOr<const Entry*> Lookup(std::string_view name, std::span<const int64_t> shape) const;

  // Const after Open.
  const std::string model_dir_;
  std::string source_;  // the file named in "not found" errors
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, Entry> tensors_;
};

}  // namespace folio

#endif  // FOLIO_COMMON_WEIGHT_LOADER_H_
