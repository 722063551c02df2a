#ifndef FOLIO_SCHEDULER_RESERVATION_SPACE_H_
#define FOLIO_SCHEDULER_RESERVATION_SPACE_H_

#include <cstdint>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "common/types.h"

namespace folio {

// Where a reservation policy's claims live when the scheduler models an
// allocator from before paging (Orca, FasterTransformer): each request gets
// one contiguous range of token slots or waits.
class ReservationSpace {
 public:
  virtual ~ReservationSpace() = default;
  virtual int64_t capacity() const = 0;
  // Claims `slots` contiguous slots for `request`; false when no range fits.
  virtual bool TryReserve(RequestId request, int64_t slots) = 0;
  // REQUIRES: request holds a reservation.
  virtual void Release(RequestId request) = 0;
};

// One linear slot space, first-fit placement, free ranges coalesced: the
// allocator whose external fragmentation the PagedAttention paper measured.
class ContiguousSlotSpace final : public ReservationSpace {
 public:
  explicit ContiguousSlotSpace(int64_t capacity);

  int64_t capacity() const override { return capacity_; }
  bool TryReserve(RequestId request, int64_t slots) override;
  void Release(RequestId request) override;

  int64_t free_slots() const { return free_slots_; }
  int64_t largest_free_range() const;
  int64_t num_reservations() const { return static_cast<int64_t>(held_.size()); }
  bool holds(RequestId request) const { return held_.contains(request); }

 private:
  struct Range {
    int64_t start;
    int64_t size;
  };
  const int64_t capacity_;
  int64_t free_slots_;
  std::map<int64_t, int64_t> free_;  // start -> size, disjoint, coalesced
  absl::flat_hash_map<RequestId, Range> held_;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_RESERVATION_SPACE_H_
