// The kernels' argument checks report why they failed through an optional
// std::string* and a false return (no absl::Status: the CUDA sources include
// these headers too).
#pragma once

#include <string>
#include <utility>

namespace folio::kernels {

// Sets *error (when asked for) to `message`; returns false, for `return Fail(...)`.
inline bool Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

}  // namespace folio::kernels
