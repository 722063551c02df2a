#ifndef FOLIO_COMMON_SAFETENSORS_H_
#define FOLIO_COMMON_SAFETENSORS_H_

// One memory-mapped .safetensors file: an 8-byte little-endian header length
// N, N bytes of JSON ({"name": {"dtype", "shape", "data_offsets": [b, e]},
// optional "__metadata__"}), then the tensor bytes (offsets relative to the
// end of the header). Only the header is read at Open; tensor bytes are paged
// in when touched, so a tensor-parallel rank that reads only its slice reads
// only those pages.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"

namespace folio {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major; empty for a scalar
  // Points into the read-only mapping; valid while the owning file is. Not
  // necessarily aligned to the element size (copy out with memcpy).
  const uint8_t* data = nullptr;
  size_t nbytes = 0;  // == product(shape) * DTypeSize(dtype)

  int64_t NumElements() const;
};

// Thread-safe: immutable after Open.
class SafetensorsFile {
 public:
  // Maps `path` read-only and validates the whole header. Errors name `path`:
  //   NOT_FOUND / PERMISSION_DENIED ... : cannot open the file;
  //   DATA_LOSS: shorter than 8 bytes, header length beyond the file, header
  //     not a JSON object, a malformed entry, offsets outside the data or
  //     overlapping another tensor, byte size != product(shape) * dtype size;
  //   INVALID_ARGUMENT: a dtype other than F32/F16/BF16 (named with the tensor).
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  ~SafetensorsFile();  // unmaps
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // nullptr if absent. The pointer lives as long as this file.
  const TensorInfo* Find(std::string_view name) const;
  // Sorted by name.
  std::vector<std::string> TensorNames() const;
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile(std::string path, const uint8_t* map, size_t map_size);
  absl::Status ParseHeader();

  // Const after construction.
  const std::string path_;
  const uint8_t* const map_;
  const size_t map_size_;
  std::unordered_map<std::string, TensorInfo> tensors_;  // filled once by ParseHeader
};

}  // namespace folio

#endif  // FOLIO_COMMON_SAFETENSORS_H_
