#ifndef FOLIO_TESTS_SCHEDULER_KV_CACHE_MANAGER_TEST_UTIL_H_
#define FOLIO_TESTS_SCHEDULER_KV_CACHE_MANAGER_TEST_UTIL_H_

// The fixture of the KvCacheManager tests (kv_cache_manager_*_test.cc):
// builds a manager per test at the block size given as the parameter, makes,
// forks, computes and frees sequences the way the scheduler does, and checks
// the invariants. Each test file instantiates it with KV_CACHE_MANAGER_BLOCK_SIZES.

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/kv_cache_manager.h"

namespace folio::test {

inline std::vector<TokenId> Tokens(int32_t n, TokenId base) {
  std::vector<TokenId> t(n);
  std::iota(t.begin(), t.end(), base);
  return t;
}

class KvCacheManagerTest : public ::testing::TestWithParam<int32_t> {
 protected:
  int32_t bs() const { return GetParam(); }

  void Init(int32_t device_blocks, int32_t host_blocks, bool caching = true,
            double watermark = 0.0, bool host_prefix_cache = false,
            int32_t host_tier_blocks_per_step = 0) {
    KvCacheManager::Options o;
    o.host_prefix_cache = host_prefix_cache;
    o.host_tier_blocks_per_step = host_tier_blocks_per_step;
    o.block_size = bs();
    o.num_device_blocks = device_blocks;
    o.num_host_blocks = host_blocks;
    o.enable_prefix_caching = caching;
    o.watermark = watermark;
    kv_ = std::make_unique<KvCacheManager>(o);
  }

  Sequence& NewSeq(const std::vector<TokenId>& prompt) {
    seqs_.push_back(std::make_unique<Sequence>(next_id_++, 1, 0, prompt));
    return *seqs_.back();
  }
  Sequence& ForkOf(Sequence& parent) {
    seqs_.push_back(parent.Fork(next_id_++, 0));
    kv_->Fork(parent, *seqs_.back());
    return *seqs_.back();
  }

  // Allocates and "computes" the next n tokens; returns the copy ops.
  std::vector<BlockCopy> Compute(Sequence& s, int32_t n, int32_t reserve = 0,
                                 std::string_view salt = "") {
    std::vector<BlockCopy> copies;
    const int32_t free_before = kv_->num_free_device_blocks();
    Sequence* one[] = {&s};
    const int32_t counts[] = {n};
    const int32_t needed = kv_->BlocksNeeded(one, counts, reserve);
    EXPECT_TRUE(kv_->AllocateSlots(s, n, reserve, salt, &copies));
    EXPECT_EQ(free_before - kv_->num_free_device_blocks(), needed);
    s.set_num_computed_tokens(s.num_computed_tokens() + n);
    return copies;
  }
  // A new sequence whose whole prompt is computed (with a prefix lookup).
  Sequence& Prefilled(const std::vector<TokenId>& prompt, std::string_view salt = "") {
    Sequence& s = NewSeq(prompt);
    kv_->AttachCachedPrefix(s, salt);
    Compute(s, s.num_pending_tokens(), 0, salt);
    return s;
  }
  // Appends one sampled token and computes it.
  std::vector<BlockCopy> Decode(Sequence& s, TokenId token) {
    s.AppendToken(token, -1.0f);
    return Compute(s, s.num_pending_tokens());
  }

  // Frees a sequence that stays in Live() (finished or recompute-preempted):
  // nothing of it is in the cache any more.
  void Release(Sequence& s) {
    kv_->Free(s);
    s.set_num_computed_tokens(0);
  }

  std::vector<const Sequence*> Live() const {
    std::vector<const Sequence*> out;
    for (const auto& s : seqs_) out.push_back(s.get());
    return out;
  }
  void ExpectInvariants() {
    const absl::Status s = kv_->CheckInvariants(Live());
    EXPECT_TRUE(s.ok()) << s;
  }
  void ExpectAllFree() {
    EXPECT_EQ(kv_->device_pool().num_free_blocks(), kv_->device_pool().num_blocks());
    EXPECT_EQ(kv_->host_pool().num_free_blocks(), kv_->host_pool().num_blocks());
    for (BlockId b = 0; b < kv_->device_pool().num_blocks(); ++b) {
      EXPECT_EQ(kv_->device_pool().ref_count(b), 0);
    }
    for (BlockId b = 0; b < kv_->host_pool().num_blocks(); ++b) {
      EXPECT_EQ(kv_->host_pool().ref_count(b), 0);
    }
    ExpectInvariants();
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  SequenceId next_id_ = 1;
};

}  // namespace folio::test

// Every KvCacheManager test runs at block sizes 8, 16 and 32 (test names end
// in /bs8, /bs16, /bs32).
#define KV_CACHE_MANAGER_BLOCK_SIZES()                                                  \
  INSTANTIATE_TEST_SUITE_P(BlockSizes, KvCacheManagerTest, ::testing::Values(8, 16, 32), \
                           [](const auto& info) { return "bs" + std::to_string(info.param); })

#endif  // FOLIO_TESTS_SCHEDULER_KV_CACHE_MANAGER_TEST_UTIL_H_
