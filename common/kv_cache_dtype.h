#ifndef FOLIO_COMMON_KV_CACHE_DTYPE_H_
#define FOLIO_COMMON_KV_CACHE_DTYPE_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/cache_layout.h"

namespace folio {

// vLLM's --kv-cache-dtype spellings for the CPU worker's KV cache: "" or
// "auto" = kFloat32 (the CPU worker computes in fp32); "fp8" or "fp8_e4m3" =
// kFp8E4m3; "int8" = kInt8 (both one-byte codes with per-block, per-KV-head
// fp32 scales: kernels/cache_layout.h). Anything else is INVALID_ARGUMENT
// naming the flag. In common/ so that folio-scheduler checks its flag against
// the same list the workers accept.
absl::StatusOr<kernels::CacheDtype> ParseCpuKvCacheDtype(std::string_view name);

// The names reports and metrics give: kernels::CacheDtypeName.

}  // namespace folio

#endif  // FOLIO_COMMON_KV_CACHE_DTYPE_H_
