// Fuzzes the safetensors header parser (common/safetensors.h): the input is a
// whole .safetensors file (8-byte little-endian header length, JSON header,
// tensor bytes), opened through SafetensorsFile::Open as a model load does.
// Checks: no crash, leak or exception; every error is DATA_LOSS or
// INVALID_ARGUMENT; on success every tensor lies inside the file, its byte
// size is product(shape) * dtype size, Find agrees with TensorNames, and the
// tensors' bytes can all be read (ASan would flag a bad data pointer).

#include <cstdint>
#include <cstring>

#include "common/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

folio::fuzz::ScratchFile& File() {
  static auto* file = new folio::fuzz::ScratchFile();
  return *file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = File().Write(data, size);
  absl::StatusOr<std::unique_ptr<folio::SafetensorsFile>> file = folio::SafetensorsFile::Open(path);
  if (!file.ok()) {
    const absl::StatusCode code = file.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument,
               "unexpected error code: %s", file.status().ToString().c_str());
    return 0;
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, sizeof(header_len));
  const uint64_t data_size = size - 8 - header_len;
  uint8_t sink = 0;
  for (const std::string& name : (*file)->TensorNames()) {
    const folio::TensorInfo* t = (*file)->Find(name);
    FUZZ_CHECK(t != nullptr && t->name == name, "TensorNames lists %s but Find does not", name.c_str());
    uint64_t elems = 1;
    for (int64_t d : t->shape) {
      FUZZ_CHECK(d >= 0, "negative dimension in %s", name.c_str());
      FUZZ_CHECK(!__builtin_mul_overflow(elems, static_cast<uint64_t>(d), &elems), "shape overflows");
    }
    FUZZ_CHECK(elems * folio::DTypeSize(t->dtype) == t->nbytes, "%s: size mismatch", name.c_str());
    FUZZ_CHECK(t->nbytes <= data_size, "%s: larger than the data", name.c_str());
    // A data pointer outside the mapping faults here.
    for (size_t i = 0; i < t->nbytes; ++i) sink ^= t->data[i];
  }
  volatile uint8_t keep = sink;
  (void)keep;
  return 0;
}
