// Prefix-cache block identity: a SHA-256 chain over (parent, tokens, salt).

#include "scheduler/block_hash.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace folio {
namespace {

std::string Hex(const BlockHash& h) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : h.bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

TEST(BlockHashTest, Deterministic) {
  const std::vector<TokenId> t = {10, 20, 30, 40};
  const BlockHash a = HashBlockTokens(nullptr, t, "");
  const BlockHash b = HashBlockTokens(nullptr, t, "");
  EXPECT_EQ(a, b);
  const BlockHash ca = HashBlockTokens(&a, t, "s");
  const BlockHash cb = HashBlockTokens(&b, t, "s");
  EXPECT_EQ(ca, cb);
}

// The digest is SHA-256 over: a has-parent byte, the parent digest (if any),
// the salt length (u64, little endian), the salt, the token ids (i32, little
// endian). Reference values computed with Python's hashlib. Pinning them keeps
// the function a real cryptographic hash (CVE-2025-25183 was a weak one).
TEST(BlockHashTest, KnownAnswer) {
  const std::vector<TokenId> first = {1, 2, 3, 4};
  const std::vector<TokenId> second = {5, 6, 7, 8};
  const BlockHash a = HashBlockTokens(nullptr, first, "");
  EXPECT_EQ(Hex(a), "269d55d70d18af5d6bb5901e0c5e62953ef8893b4fbb07e0b6ab3f79727b92ef");
  const BlockHash b = HashBlockTokens(&a, second, "tenant");
  EXPECT_EQ(Hex(b), "602854f3021ffbd6d96d4dcb07e086dd0b04ff03eba6e5e56e3fc50c30a4cedc");
}

TEST(BlockHashTest, ChainDependsOnParent) {
  const std::vector<TokenId> p1 = {1, 2, 3, 4};
  const std::vector<TokenId> p2 = {1, 2, 3, 5};
  const std::vector<TokenId> t = {9, 9, 9, 9};
  const BlockHash h1 = HashBlockTokens(nullptr, p1, "");
  const BlockHash h2 = HashBlockTokens(nullptr, p2, "");
  ASSERT_NE(h1, h2);
  // Same tokens in the child block, different prefixes: different identity.
  EXPECT_NE(HashBlockTokens(&h1, t, ""), HashBlockTokens(&h2, t, ""));
  // And a child differs from the same tokens as a first block.
  EXPECT_NE(HashBlockTokens(&h1, t, ""), HashBlockTokens(nullptr, t, ""));
}

TEST(BlockHashTest, NoParentDiffersFromAllZeroParent) {
  const std::vector<TokenId> t = {1, 2, 3, 4};
  const BlockHash zero;
  EXPECT_NE(HashBlockTokens(nullptr, t, ""), HashBlockTokens(&zero, t, ""));
}

TEST(BlockHashTest, SaltChangesTheHash) {
  const std::vector<TokenId> t = {1, 2, 3, 4};
  const BlockHash none = HashBlockTokens(nullptr, t, "");
  const BlockHash a = HashBlockTokens(nullptr, t, "a");
  const BlockHash b = HashBlockTokens(nullptr, t, "b");
  EXPECT_NE(none, a);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, HashBlockTokens(nullptr, t, std::string("a")));
  // A salt that spells out token bytes cannot collide with those tokens: the
  // salt is length-prefixed.
  const std::vector<TokenId> one = {1};
  const std::vector<TokenId> two = {1, 2};
  const std::string two_as_salt("\x02\x00\x00\x00", 4);
  EXPECT_NE(HashBlockTokens(nullptr, one, two_as_salt), HashBlockTokens(nullptr, two, ""));
}

TEST(BlockHashTest, DifferentTokensDiffer) {
  const std::vector<TokenId> base = {100, 200, 300, 400, 500, 600, 700, 800};
  const BlockHash h = HashBlockTokens(nullptr, base, "");
  for (size_t i = 0; i < base.size(); ++i) {
    std::vector<TokenId> changed = base;
    changed[i] += 1;
    EXPECT_NE(HashBlockTokens(nullptr, changed, ""), h) << "position " << i;
  }
  std::vector<TokenId> swapped = base;
  std::swap(swapped[0], swapped[1]);
  EXPECT_NE(HashBlockTokens(nullptr, swapped, ""), h);
  // Length matters too.
  const std::vector<TokenId> shorter(base.begin(), base.end() - 1);
  EXPECT_NE(HashBlockTokens(nullptr, shorter, ""), h);
}

TEST(BlockHashTest, ManyBlocksNoCollisionsAndUsableAsMapKey) {
  absl::flat_hash_map<BlockHash, int> seen;
  BlockHash parent;
  for (int i = 0; i < 5000; ++i) {
    const std::vector<TokenId> t = {i, i * 7, i * 13, -i};
    const BlockHash h = HashBlockTokens(i == 0 ? nullptr : &parent, t, "");
    ASSERT_TRUE(seen.emplace(h, i).second) << "collision at " << i;
    parent = h;
  }
  EXPECT_EQ(seen.size(), 5000u);
  // Lookup by an equal, separately computed value.
  const std::vector<TokenId> t0 = {0, 0, 0, 0};
  EXPECT_EQ(seen.at(HashBlockTokens(nullptr, t0, "")), 0);
}

}  // namespace
}  // namespace folio
