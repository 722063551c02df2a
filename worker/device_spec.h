#ifndef FOLIO_WORKER_DEVICE_SPEC_H_
#define FOLIO_WORKER_DEVICE_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace folio {

// Where a worker rank computes: InitializeRequest.device parsed.
struct DeviceSpec {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  // "cuda:N": N. "cuda": -1, meaning rank % (CUDA devices this process
  // sees), so the ranks of one host spread over its devices (folio serve
  // --device cuda puts rank r on cuda:r).
  int32_t ordinal = -1;

  bool is_cuda() const { return kind == Kind::kCuda; }
};

// "" and "cpu": the CPU; "cuda" and "cuda:N" (N a decimal in [0, 1024)):
// CUDA. Anything else is INVALID_ARGUMENT naming the field.
inline absl::StatusOr<DeviceSpec> ParseDevice(const std::string& device) {
  DeviceSpec spec;
  if (device.empty() || device == "cpu") return spec;
  spec.kind = DeviceSpec::Kind::kCuda;
  if (device == "cuda") return spec;
  int32_t n = -1;
  if (device.size() > 5 && device.substr(0, 5) == "cuda:" &&
      device.find_first_not_of("0123456789", 5) == std::string::npos &&
      absl::SimpleAtoi(device.substr(5), &n) && n >= 0 && n < 1024) {
    spec.ordinal = n;
    return spec;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "InitializeRequest.device \"", device, "\": expected \"cpu\", \"cuda\" or \"cuda:N\""));
}

}  // namespace folio

#endif  // FOLIO_WORKER_DEVICE_SPEC_H_
