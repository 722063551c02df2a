#ifndef FOLIO_COMMON_TYPES_H_
#define FOLIO_COMMON_TYPES_H_

#include <cstdint>

namespace folio {

// Identifiers shared by the scheduler and the workers.
using TokenId = int32_t;
using BlockId = int32_t;     // index into a pool (device or host); global across ranks
using SequenceId = int64_t;  // unique for the lifetime of a scheduler
using RequestId = int64_t;   // engine-internal id of a request (a group of sequences)

inline constexpr BlockId kNoBlock = -1;

}  // namespace folio

#endif  // FOLIO_COMMON_TYPES_H_
