#ifndef FOLIO_COMMON_TEXT_FILE_H_
#define FOLIO_COMMON_TEXT_FILE_H_

// Whole-file reads of the small JSON files a model directory holds.

#include <string>

#include "absl/status/statusor.h"

namespace folio {

// The file's bytes. NOT_FOUND naming the path (and errno's reason) when it
// cannot be opened, DATA_LOSS when reading fails part way.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace folio

#endif  // FOLIO_COMMON_TEXT_FILE_H_
