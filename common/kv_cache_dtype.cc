#include "common/kv_cache_dtype.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace folio {

absl::StatusOr<kernels::CacheDtype> ParseCpuKvCacheDtype(std::string_view name) {
  using kernels::CacheDtype;
  if (name.empty() || name == "auto") return CacheDtype::kFloat32;
  // vLLM's "fp8" is e4m3 (its e5m2 has too few mantissa bits for a cache).
  if (name == "fp8" || name == "fp8_e4m3") return CacheDtype::kFp8E4m3;
  if (name == "int8") return CacheDtype::kInt8;
  return absl::InvalidArgumentError(absl::StrCat("--kv-cache-dtype '", std::string(name),
                                                 "': expected auto, fp8 (fp8_e4m3) or int8"));
}

}  // namespace folio
