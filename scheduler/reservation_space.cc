#include "scheduler/reservation_space.h"

#include <algorithm>

#include "common/check.h"

namespace folio {

ContiguousSlotSpace::ContiguousSlotSpace(int64_t capacity)
    : capacity_(capacity), free_slots_(capacity) {
  FOLIO_CHECK_GT(capacity, 0);
  free_[0] = capacity;
}

bool ContiguousSlotSpace::TryReserve(RequestId request, int64_t slots) {
  FOLIO_CHECK(!held_.contains(request));
  FOLIO_CHECK_GT(slots, 0);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < slots) continue;
    const int64_t start = it->first;
    const int64_t rest = it->second - slots;
    free_.erase(it);
    if (rest > 0) free_[start + slots] = rest;
    held_[request] = {start, slots};
    free_slots_ -= slots;
    return true;
  }
  return false;
}

void ContiguousSlotSpace::Release(RequestId request) {
  auto held = held_.find(request);
  FOLIO_CHECK(held != held_.end());
  int64_t start = held->second.start;
  int64_t size = held->second.size;
  held_.erase(held);
  free_slots_ += size;
  // Coalesce with the neighbouring free ranges.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

int64_t ContiguousSlotSpace::largest_free_range() const {
  int64_t largest = 0;
  for (const auto& [start, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace folio
