// CPU cache ops against naive references on random data. The references
// below spell the layout out by hand (not through kernels/cache_layout.h), so
// a wrong shared index helper fails here too.
#include "kernels/cpu/cache_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cache_layout.h"
#include "kernels/kv_cache_view.h"

namespace folio::kernels {
namespace {

using Bytes = std::vector<uint8_t>;

// A pool owning its per-layer K and V bytes, filled with random data.
struct Pool {
  Pool(int32_t layers, int64_t blocks, int64_t bytes_per_block, std::mt19937& rng)
      : num_blocks(blocks), bytes(bytes_per_block), k(layers), v(layers) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (int32_t l = 0; l < layers; ++l) {
      for (Bytes* t : {&k[l], &v[l]}) {
        t->resize(blocks * bytes_per_block);
        for (uint8_t& b : *t) b = static_cast<uint8_t>(byte(rng));
      }
    }
  }

  KvCacheView View() {
    KvCacheView view;
    view.num_layers = static_cast<int32_t>(k.size());
    view.num_blocks = num_blocks;
    view.bytes_per_block = bytes;
    for (size_t l = 0; l < k.size(); ++l) {
      view.k[l] = k[l].data();
      view.v[l] = v[l].data();
    }
    return view;
  }

  // Naive reference copy of one block, every layer, K and V.
  void CopyBlockFrom(const Pool& src, int64_t src_block, int64_t dst_block) {
    for (size_t l = 0; l < k.size(); ++l) {
      for (int64_t b = 0; b < bytes; ++b) {
        k[l][dst_block * bytes + b] = src.k[l][src_block * bytes + b];
        v[l][dst_block * bytes + b] = src.v[l][src_block * bytes + b];
      }
    }
  }

  bool operator==(const Pool& o) const { return k == o.k && v == o.v; }

  int64_t num_blocks;
  int64_t bytes;
  std::vector<Bytes> k, v;
};

// n distinct block ids in [0, num_blocks), in random order.
std::vector<int64_t> DistinctBlocks(int64_t n, int64_t num_blocks, std::mt19937& rng) {
  std::vector<int64_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(n);
  return ids;
}

TEST(CacheLayoutTest, BlockOfOneLayerIsContiguous) {
  const CacheShape s{.num_kv_heads = 3, .block_size = 16, .head_dim = 40};
  EXPECT_EQ(BlockElems(s), 3 * 16 * 40);
  EXPECT_EQ(CacheIndex(s, 5, 0, 0, 0), 5 * BlockElems(s));
  EXPECT_EQ(CacheIndex(s, 5, 2, 15, 39) + 1, CacheIndex(s, 6, 0, 0, 0));
  // Slot 5*16+7, element (head 2, d 11).
  EXPECT_EQ(SlotElemIndex(s, 5 * 16 + 7, 2 * 40 + 11), ((5 * 3 + 2) * 16 + 7) * 40 + 11);
  EXPECT_EQ(CacheDtypeBytes(CacheDtype::kFloat32), 4);
  EXPECT_EQ(CacheDtypeBytes(CacheDtype::kFloat16), 2);
  EXPECT_EQ(CacheDtypeBytes(CacheDtype::kBFloat16), 2);
}

TEST(CopyBlocksTest, CopiesPairsAndNothingElse) {
  std::mt19937 rng(1);
  // Odd byte counts as well as block-sized ones: the op works on bytes.
  for (auto [layers, blocks, bytes] : {std::tuple{1, 8, 37}, std::tuple{3, 64, 4096},
                                       std::tuple{5, 33, 8 * 16 * 2}}) {
    SCOPED_TRACE(testing::Message() << layers << " layers, " << blocks << " blocks, "
                                    << bytes << " bytes");
    Pool pool(layers, blocks, bytes, rng);
    // Copy-on-write forks: 3 srcs, each shared by several dsts.
    const std::vector<int64_t> ids = DistinctBlocks(std::min<int64_t>(blocks, 12), blocks, rng);
    std::vector<BlockPair> pairs;
    for (size_t i = 3; i < ids.size(); ++i) pairs.push_back({.src = ids[i % 3], .dst = ids[i]});

    Pool expected = pool;
    for (const BlockPair& p : pairs) expected.CopyBlockFrom(pool, p.src, p.dst);

    std::string error;
    ASSERT_TRUE(cpu::CopyBlocks(pool.View(), pairs, &error)) << error;
    EXPECT_TRUE(pool == expected);
  }
}

TEST(CopyBlocksTest, RejectsBadPairsAndWritesNothing) {
  std::mt19937 rng(2);
  Pool pool(2, 16, 64, rng);
  const Pool before = pool;
  const std::vector<std::vector<BlockPair>> bad = {
      {{.src = 0, .dst = 16}},                           // dst out of range
      {{.src = 16, .dst = 1}},                           // src out of range
      {{.src = -1, .dst = 1}},                           // negative src
      {{.src = 0, .dst = 1}, {.src = 2, .dst = 1}},      // dst written twice
      {{.src = 0, .dst = 1}, {.src = 1, .dst = 2}},      // dst also a src
      {{.src = 3, .dst = 3}},                            // copy onto itself
      {{.src = 0, .dst = 1}, {.src = 0, .dst = -5}},     // valid pair, then bad
  };
  for (const auto& pairs : bad) {
    std::string error;
    EXPECT_FALSE(cpu::CopyBlocks(pool.View(), pairs, &error));
    EXPECT_FALSE(error.empty());
  }
  EXPECT_TRUE(pool == before);
}

TEST(SwapBlocksTest, RoundTripDeviceHostDeviceRestoresData) {
  std::mt19937 rng(3);
  for (auto [layers, bytes] : {std::pair{2, 48}, std::pair{4, 2048}}) {
    Pool device(layers, 40, bytes, rng);
    Pool host(layers, 24, bytes, rng);
    const Pool original = device;

    // Swap out 10 device blocks (two neighbour runs and singles) to host blocks.
    std::vector<BlockPair> out;
    const std::vector<int64_t> host_ids = DistinctBlocks(10, host.num_blocks, rng);
    const std::vector<int64_t> dev_ids = {3, 4, 5, 6, 20, 21, 0, 39, 11, 30};
    for (size_t i = 0; i < dev_ids.size(); ++i) out.push_back({dev_ids[i], host_ids[i]});
    Pool host_expected = host;
    for (const BlockPair& p : out) host_expected.CopyBlockFrom(device, p.src, p.dst);
    std::string error;
    ASSERT_TRUE(cpu::SwapBlocks(device.View(), host.View(), out, &error)) << error;
    EXPECT_TRUE(host == host_expected);

    // The device blocks get reused by someone else meanwhile.
    Pool scribble(layers, device.num_blocks, bytes, rng);
    for (int64_t b : dev_ids) device.CopyBlockFrom(scribble, b, b);
    ASSERT_FALSE(device == original);

    // Swap back in to the same blocks: the device pool is whole again.
    std::vector<BlockPair> in;
    for (const BlockPair& p : out) in.push_back({.src = p.dst, .dst = p.src});
    ASSERT_TRUE(cpu::SwapBlocks(host.View(), device.View(), in, &error)) << error;
    EXPECT_TRUE(device == original);
    EXPECT_TRUE(host == host_expected);  // swap-in leaves the host copy alone
  }
}

TEST(SwapBlocksTest, RejectsMismatchedPoolsAndBadPairs) {
  std::mt19937 rng(4);
  Pool device(2, 8, 64, rng);
  Pool other_layers(3, 8, 64, rng);
  Pool other_bytes(2, 8, 32, rng);
  Pool host(2, 4, 64, rng);
  const Pool host_before = host;
  const std::vector<BlockPair> ok = {{.src = 0, .dst = 0}};
  std::string error;
  EXPECT_FALSE(cpu::SwapBlocks(other_layers.View(), host.View(), ok, &error));
  EXPECT_FALSE(cpu::SwapBlocks(other_bytes.View(), host.View(), ok, &error));
  // dst 4 is inside the device pool but outside the smaller host pool.
  const std::vector<BlockPair> bad = {{.src = 1, .dst = 4}};
  EXPECT_FALSE(cpu::SwapBlocks(device.View(), host.View(), bad, &error));
  EXPECT_FALSE(error.empty());
  EXPECT_TRUE(host == host_before);
}

// block_size, head_dim, num_kv_heads.
class ReshapeAndCacheTest
    : public testing::TestWithParam<std::tuple<int32_t, int32_t, int32_t>> {};

TEST_P(ReshapeAndCacheTest, WritesExactlyTheNamedSlots) {
  const auto [block_size, head_dim, heads] = GetParam();
  const CacheShape shape{.num_kv_heads = heads, .block_size = block_size, .head_dim = head_dim};
  std::mt19937 rng(block_size * 1000 + head_dim * 10 + heads);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);

  const int64_t num_blocks = 6;
  const int64_t elems = num_blocks * BlockElems(shape);
  std::vector<float> k_cache(elems), v_cache(elems);
  for (float& x : k_cache) x = uniform(rng);
  for (float& x : v_cache) x = uniform(rng);

  // Prefill-like: tokens over several blocks in random slots, a few padded.
  const int64_t num_tokens = block_size * 2 + 5;
  std::vector<int64_t> slots = DistinctBlocks(num_tokens, num_blocks * block_size, rng);
  for (int64_t t = 0; t < num_tokens; t += 7) slots[t] = kSkipSlot;
  const int64_t n = int64_t{heads} * head_dim;
  std::vector<float> key(num_tokens * n), value(num_tokens * n);
  for (float& x : key) x = uniform(rng);
  for (float& x : value) x = uniform(rng);

  // Naive reference: token t, head h, dim d -> block s / bs, offset s % bs.
  std::vector<float> k_expected = k_cache, v_expected = v_cache;
  int64_t written = 0;
  for (int64_t t = 0; t < num_tokens; ++t) {
    if (slots[t] < 0) continue;
    ++written;
    const int64_t block = slots[t] / block_size, offset = slots[t] % block_size;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < head_dim; ++d) {
        const int64_t dst = ((block * heads + h) * block_size + offset) * head_dim + d;
        k_expected[dst] = key[(t * heads + h) * head_dim + d];
        v_expected[dst] = value[(t * heads + h) * head_dim + d];
      }
    }
  }

  const std::vector<float> k_before = k_cache;
  const KvLayerView layer{k_cache.data(), v_cache.data(), num_blocks,
                          BlockElems(shape) * int64_t{sizeof(float)}};
  std::string error;
  ASSERT_TRUE(cpu::ReshapeAndCache(key.data(), value.data(), slots.data(), num_tokens,
                                   shape, layer, &error))
      << error;
  EXPECT_TRUE(k_cache == k_expected);
  EXPECT_TRUE(v_cache == v_expected);
  // Exactly the named slots changed (random data never repeats a value here).
  int64_t changed = 0;
  for (int64_t i = 0; i < elems; ++i) changed += k_cache[i] != k_before[i];
  EXPECT_EQ(changed, written * n);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReshapeAndCacheTest,
                         testing::Combine(testing::Values(8, 16, 32),
                                          testing::Values(16, 64, 80, 128),
                                          testing::Values(1, 4)));

TEST(ReshapeAndCacheTest, RejectsBadInputsAndWritesNothing) {
  const CacheShape shape{.num_kv_heads = 2, .block_size = 8, .head_dim = 4};
  const int64_t num_blocks = 3, n = 8;
  std::vector<float> k_cache(num_blocks * BlockElems(shape), 0.5f);
  std::vector<float> v_cache = k_cache;
  const std::vector<float> key(2 * n, 1.f), value(2 * n, 2.f);
  const KvLayerView layer{k_cache.data(), v_cache.data(), num_blocks,
                          BlockElems(shape) * int64_t{sizeof(float)}};
  std::string error;

  // First slot valid, second bad: nothing may be written.
  for (int64_t bad_slot : {num_blocks * 8, int64_t{-2}}) {
    const std::vector<int64_t> slots = {0, bad_slot};
    EXPECT_FALSE(cpu::ReshapeAndCache(key.data(), value.data(), slots.data(), 2, shape,
                                      layer, &error));
    EXPECT_FALSE(error.empty());
  }
  const std::vector<int64_t> slots = {0, 1};
  // bytes_per_block that does not match fp32 storage of this shape.
  KvLayerView half_layer = layer;
  half_layer.bytes_per_block /= 2;
  EXPECT_FALSE(cpu::ReshapeAndCache(key.data(), value.data(), slots.data(), 2, shape,
                                    half_layer, &error));
  KvLayerView null_layer = layer;
  null_layer.v = nullptr;
  EXPECT_FALSE(cpu::ReshapeAndCache(key.data(), value.data(), slots.data(), 2, shape,
                                    null_layer, &error));
  EXPECT_FALSE(cpu::ReshapeAndCache(nullptr, value.data(), slots.data(), 2, shape, layer,
                                    &error));
  EXPECT_TRUE(std::all_of(k_cache.begin(), k_cache.end(), [](float x) { return x == 0.5f; }));
  EXPECT_TRUE(std::all_of(v_cache.begin(), v_cache.end(), [](float x) { return x == 0.5f; }));
}

TEST(ValidateTest, AcceptsGoodViewAndRejectsBadOnes) {
  std::mt19937 rng(5);
  Pool pool(3, 8, 64, rng);
  std::string error;
  EXPECT_TRUE(pool.View().Validate(&error)) << error;

  KvCacheView v = pool.View();
  v.v[1] = nullptr;
  EXPECT_FALSE(v.Validate(&error));
  EXPECT_NE(error.find("layer 1"), std::string::npos) << error;

  v = pool.View();
  v.num_blocks = 0;
  EXPECT_FALSE(v.Validate(&error));
  v = pool.View();
  v.bytes_per_block = 0;
  EXPECT_FALSE(v.Validate(&error));
  v = pool.View();
  v.num_layers = 0;
  EXPECT_FALSE(v.Validate(&error));
  v.num_layers = KvCacheView::kMaxLayers + 1;
  EXPECT_FALSE(v.Validate(&error));
  EXPECT_FALSE(v.Validate(nullptr));  // error is optional

  EXPECT_TRUE(ValidateLayerView(pool.View().Layer(2), &error)) << error;
  KvLayerView layer = pool.View().Layer(0);
  layer.k = nullptr;
  EXPECT_FALSE(ValidateLayerView(layer, &error));

  const std::vector<BlockPair> in_range = {{.src = 7, .dst = 0}};
  const std::vector<BlockPair> out_of_range = {{.src = 8, .dst = 0}};
  EXPECT_TRUE(ValidateBlockPairs(in_range, 8, 8, true, &error)) << error;
  EXPECT_FALSE(ValidateBlockPairs(out_of_range, 8, 8, true, &error));
  EXPECT_TRUE(ValidateBlockPairs(in_range, 8, 8, true, nullptr));

  const CacheShape shape{.num_kv_heads = 2, .block_size = 16, .head_dim = 8};
  EXPECT_TRUE(ValidateCacheShape(shape, CacheDtype::kFloat16, 2 * 16 * 8 * 2, &error)) << error;
  EXPECT_FALSE(ValidateCacheShape(shape, CacheDtype::kFloat32, 2 * 16 * 8 * 2, &error));
  EXPECT_FALSE(ValidateCacheShape(CacheShape{}, CacheDtype::kFloat32, 0, &error));
}

}  // namespace
}  // namespace folio::kernels
