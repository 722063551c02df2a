// ContiguousSlotSpace: the pre-paging allocator (one contiguous range of token
// slots per request, first fit, coalescing), whose external fragmentation the
// PagedAttention paper measured.

#include "scheduler/reservation_space.h"

#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace folio {
namespace {

TEST(ContiguousSlotSpaceTest, StartsAsOneFreeRange) {
  ContiguousSlotSpace space(100);
  EXPECT_EQ(space.capacity(), 100);
  EXPECT_EQ(space.free_slots(), 100);
  EXPECT_EQ(space.largest_free_range(), 100);
  EXPECT_EQ(space.num_reservations(), 0);
  EXPECT_FALSE(space.holds(1));
}

TEST(ContiguousSlotSpaceTest, ReserveAndReleaseWholeCapacity) {
  ContiguousSlotSpace space(100);
  EXPECT_TRUE(space.TryReserve(1, 100));
  EXPECT_TRUE(space.holds(1));
  EXPECT_EQ(space.free_slots(), 0);
  EXPECT_EQ(space.largest_free_range(), 0);
  EXPECT_FALSE(space.TryReserve(2, 1));
  EXPECT_FALSE(space.holds(2));
  space.Release(1);
  EXPECT_EQ(space.free_slots(), 100);
  EXPECT_EQ(space.largest_free_range(), 100);
  EXPECT_EQ(space.num_reservations(), 0);
  EXPECT_FALSE(space.TryReserve(3, 101));
}

TEST(ContiguousSlotSpaceTest, FirstFitTakesTheLowestHoleThatFits) {
  ContiguousSlotSpace space(100);
  // [A 10][B 20][C 10][D 30][free 30]
  ASSERT_TRUE(space.TryReserve(1, 10));
  ASSERT_TRUE(space.TryReserve(2, 20));
  ASSERT_TRUE(space.TryReserve(3, 10));
  ASSERT_TRUE(space.TryReserve(4, 30));
  space.Release(1);  // hole of 10 at 0
  space.Release(3);  // hole of 10 at 30
  // free: [0,10) [30,40) [70,100)
  EXPECT_EQ(space.free_slots(), 50);
  EXPECT_EQ(space.largest_free_range(), 30);
  // 5 fits the first hole; then 5 more fill it exactly.
  ASSERT_TRUE(space.TryReserve(5, 5));
  ASSERT_TRUE(space.TryReserve(6, 5));
  // The next 10 cannot use [0,10) any more: first fit lands at 30.
  ASSERT_TRUE(space.TryReserve(7, 10));
  // 30 fits only the tail.
  ASSERT_TRUE(space.TryReserve(8, 30));
  EXPECT_EQ(space.free_slots(), 0);
  // Releasing 6 and 7 leaves [5,10) and [30,40): a 6-slot request fits at 30.
  space.Release(6);
  space.Release(7);
  ASSERT_TRUE(space.TryReserve(9, 6));
  EXPECT_EQ(space.largest_free_range(), 5);  // [5,10) and [36,40)
  EXPECT_EQ(space.free_slots(), 9);
}

TEST(ContiguousSlotSpaceTest, FirstFitIsNotBestFit) {
  ContiguousSlotSpace space(100);
  ASSERT_TRUE(space.TryReserve(1, 30));  // [0,30)
  ASSERT_TRUE(space.TryReserve(2, 10));  // [30,40)
  ASSERT_TRUE(space.TryReserve(3, 10));  // [40,50)
  ASSERT_TRUE(space.TryReserve(4, 50));  // [50,100)
  space.Release(1);                      // hole of 30 at 0
  space.Release(3);                      // hole of 10 at 40
  // 10 slots: best fit would take the exact hole at 40; first fit splits
  // the big one at 0, leaving 20 there.
  ASSERT_TRUE(space.TryReserve(5, 10));
  EXPECT_EQ(space.largest_free_range(), 20);
  EXPECT_TRUE(space.TryReserve(6, 20));
  EXPECT_TRUE(space.TryReserve(7, 10));
  EXPECT_EQ(space.free_slots(), 0);
}

TEST(ContiguousSlotSpaceTest, ExternalFragmentationRefusesAFittingTotal) {
  ContiguousSlotSpace space(100);
  for (RequestId r = 1; r <= 10; ++r) ASSERT_TRUE(space.TryReserve(r, 10));
  for (RequestId r = 1; r <= 10; r += 2) space.Release(r);  // five holes of 10
  EXPECT_EQ(space.free_slots(), 50);
  EXPECT_EQ(space.largest_free_range(), 10);
  // 50 slots are free but no 11 of them are contiguous.
  EXPECT_FALSE(space.TryReserve(100, 11));
  EXPECT_FALSE(space.holds(100));
  EXPECT_EQ(space.free_slots(), 50);  // a failed reserve changes nothing
  EXPECT_TRUE(space.TryReserve(101, 10));
  EXPECT_EQ(space.largest_free_range(), 10);
}

TEST(ContiguousSlotSpaceTest, ReleaseCoalescesWithTheLeftNeighbour) {
  ContiguousSlotSpace space(30);
  ASSERT_TRUE(space.TryReserve(1, 10));  // [0,10)
  ASSERT_TRUE(space.TryReserve(2, 10));  // [10,20)
  ASSERT_TRUE(space.TryReserve(3, 10));  // [20,30)
  space.Release(1);
  EXPECT_EQ(space.largest_free_range(), 10);
  space.Release(2);  // joins [0,10)
  EXPECT_EQ(space.largest_free_range(), 20);
  EXPECT_TRUE(space.TryReserve(4, 20));
}

TEST(ContiguousSlotSpaceTest, ReleaseCoalescesWithTheRightNeighbour) {
  ContiguousSlotSpace space(30);
  ASSERT_TRUE(space.TryReserve(1, 10));
  ASSERT_TRUE(space.TryReserve(2, 10));
  ASSERT_TRUE(space.TryReserve(3, 10));
  space.Release(3);
  space.Release(2);  // joins [20,30)
  EXPECT_EQ(space.largest_free_range(), 20);
  EXPECT_FALSE(space.TryReserve(4, 21));
  EXPECT_TRUE(space.TryReserve(4, 20));
  EXPECT_EQ(space.free_slots(), 0);
}

TEST(ContiguousSlotSpaceTest, ReleaseCoalescesWithBothNeighbours) {
  ContiguousSlotSpace space(40);
  ASSERT_TRUE(space.TryReserve(1, 10));
  ASSERT_TRUE(space.TryReserve(2, 10));
  ASSERT_TRUE(space.TryReserve(3, 10));
  ASSERT_TRUE(space.TryReserve(4, 10));
  space.Release(1);
  space.Release(3);
  EXPECT_EQ(space.largest_free_range(), 10);
  space.Release(2);  // [0,30) in one piece
  EXPECT_EQ(space.largest_free_range(), 30);
  EXPECT_TRUE(space.TryReserve(5, 30));
  EXPECT_EQ(space.free_slots(), 0);
  space.Release(4);
  space.Release(5);
  EXPECT_EQ(space.largest_free_range(), 40);
}

TEST(ContiguousSlotSpaceTest, NoCoalescingAcrossAHeldRange) {
  ContiguousSlotSpace space(30);
  ASSERT_TRUE(space.TryReserve(1, 10));
  ASSERT_TRUE(space.TryReserve(2, 10));
  ASSERT_TRUE(space.TryReserve(3, 10));
  space.Release(1);
  space.Release(3);
  EXPECT_EQ(space.free_slots(), 20);
  EXPECT_EQ(space.largest_free_range(), 10);
  EXPECT_FALSE(space.TryReserve(4, 11));
}

TEST(ContiguousSlotSpaceDeathTest, MisuseDies) {
  ContiguousSlotSpace space(10);
  ASSERT_TRUE(space.TryReserve(1, 5));
  EXPECT_DEATH(space.TryReserve(1, 1), "CHECK failed");  // already holds one
  EXPECT_DEATH(space.Release(2), "CHECK failed");        // holds none
  EXPECT_DEATH(space.TryReserve(3, 0), "CHECK failed");
}

// A slot-by-slot model: after any sequence of reserves and releases the
// space agrees with it on free slots, the largest free run, and whether
// first fit finds a place (and where: the next reserve's effect).
TEST(ContiguousSlotSpaceTest, AgreesWithASlotByslotModel) {
  constexpr int64_t kCap = 200;
  ContiguousSlotSpace space(kCap);
  std::vector<RequestId> owner(kCap, 0);  // 0 = free
  std::map<RequestId, int64_t> held;
  std::mt19937_64 rng(12345);
  RequestId next = 1;
  auto first_fit = [&](int64_t n) -> int64_t {
    int64_t run = 0;
    for (int64_t i = 0; i < kCap; ++i) {
      run = owner[i] == 0 ? run + 1 : 0;
      if (run == n) return i - n + 1;
    }
    return -1;
  };
  for (int step = 0; step < 20000; ++step) {
    if (held.empty() || rng() % 2 == 0) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % 40);
      const int64_t at = first_fit(n);
      const RequestId id = next++;
      ASSERT_EQ(space.TryReserve(id, n), at >= 0) << "step " << step;
      if (at >= 0) {
        for (int64_t i = at; i < at + n; ++i) owner[i] = id;
        held[id] = n;
      }
    } else {
      auto it = held.begin();
      std::advance(it, static_cast<int64_t>(rng() % held.size()));
      space.Release(it->first);
      for (RequestId& o : owner) {
        if (o == it->first) o = 0;
      }
      held.erase(it);
    }
    int64_t free = 0, run = 0, largest = 0;
    for (RequestId o : owner) {
      free += o == 0;
      run = o == 0 ? run + 1 : 0;
      largest = std::max(largest, run);
    }
    ASSERT_EQ(space.free_slots(), free) << "step " << step;
    ASSERT_EQ(space.largest_free_range(), largest) << "step " << step;
    ASSERT_EQ(space.num_reservations(), static_cast<int64_t>(held.size()));
  }
}

}  // namespace
}  // namespace folio
