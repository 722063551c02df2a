// Paged attention kernels against the naive contiguous reference
// (kernels/cpu/reference_attention.h) on random shapes. The paged pool is
// written by hand below (not through kernels/cache_layout.h) with shuffled,
// non-contiguous block ids; every slot no sequence owns holds NaN, and
// table entries past a sequence's last block point at NaN blocks, so a
// kernel reading anything it should not produces NaN and fails.
#include "kernels/cpu/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reference_attention.h"

namespace folio::kernels::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Case {
  int32_t block_size;
  int32_t head_dim;
  int32_t num_kv_heads;
  int32_t group;                      // query heads per KV head
  std::vector<int32_t> context_lens;  // per sequence
  std::vector<int32_t> query_lens;    // per sequence (all 1 for decode)
  float score_mult = 1.0f;            // scale = score_mult / sqrt(head_dim)
  uint32_t seed = 1;
  int32_t sliding_window = 0;  // > 0: each query sees only its last W positions

  int32_t num_heads() const { return num_kv_heads * group; }
  int32_t num_seqs() const { return static_cast<int32_t>(context_lens.size()); }
};

// Test names: gtest prints the parameter through this.
std::string Describe(const Case& c);
void PrintTo(const Case& c, std::ostream* os) { *os << Describe(c); }

std::string Describe(const Case& c) {
  std::string s = "bs" + std::to_string(c.block_size) + "_hd" + std::to_string(c.head_dim) + "_kv" +
                  std::to_string(c.num_kv_heads) + "_g" + std::to_string(c.group) + "_x" +
                  std::to_string(static_cast<int>(c.score_mult)) + "_ctx:q";
  for (int32_t i = 0; i < c.num_seqs(); ++i) {
    s += "_" + std::to_string(c.context_lens[i]) + ":" + std::to_string(c.query_lens[i]);
  }
  if (c.sliding_window > 0) s += "_window" + std::to_string(c.sliding_window);
  return s;
}

// The first position any query of sequence s sees: its first query's
// window start (0 without a window).
int32_t FirstSeen(const Case& c, int32_t s) {
  const int32_t first_query = c.context_lens[s] - std::max(c.query_lens[s], 1);
  return c.sliding_window > 0 ? std::max(0, first_query - c.sliding_window + 1) : 0;
}

// A batch: per-sequence contiguous K/V (the reference's input), the same
// data in a paged pool and in a contiguous cache, and the queries.
struct Batch {
  explicit Batch(const Case& c) : c(c) {
    std::mt19937 rng(c.seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    const int32_t n = c.num_seqs();
    const int64_t token_elems = int64_t{c.num_kv_heads} * c.head_dim;
    for (int32_t s = 0; s < n; ++s) {
      k.emplace_back(c.context_lens[s] * token_elems);
      v.emplace_back(c.context_lens[s] * token_elems);
      for (float& x : k.back()) x = uni(rng);
      for (float& x : v.back()) x = uni(rng);
    }
    // Block tables: shuffled ids, a few spare (NaN) blocks.
    int32_t used = 0;
    for (int32_t s = 0; s < n; ++s) {
      const int32_t blocks = (c.context_lens[s] + c.block_size - 1) / c.block_size;
      max_blocks = std::max(max_blocks, blocks);
      used += blocks;
    }
    max_blocks += 1;  // every row has at least one padding entry
    num_blocks = used + 3;
    std::vector<int32_t> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    const int32_t spare = ids.back();  // never owned by a sequence
    table.assign(int64_t{n} * max_blocks, spare);
    int32_t next = 0;
    for (int32_t s = 0; s < n; ++s) {
      const int32_t blocks = (c.context_lens[s] + c.block_size - 1) / c.block_size;
      for (int32_t b = 0; b < blocks; ++b) table[int64_t{s} * max_blocks + b] = ids[next++];
    }
    // Paged pool [block][kv_head][offset][d], by hand.
    const int64_t pool = int64_t{num_blocks} * c.num_kv_heads * c.block_size * c.head_dim;
    k_pool.assign(pool, kNaN);
    v_pool.assign(pool, kNaN);
    max_len = std::max(1, *std::max_element(c.context_lens.begin(), c.context_lens.end()));
    k_contig.assign(int64_t{n} * c.num_kv_heads * max_len * c.head_dim, kNaN);
    v_contig.assign(k_contig.size(), kNaN);
    for (int32_t s = 0; s < n; ++s) {
      for (int32_t t = 0; t < c.context_lens[s]; ++t) {
        const int64_t block = table[int64_t{s} * max_blocks + t / c.block_size];
        for (int32_t h = 0; h < c.num_kv_heads; ++h) {
          for (int32_t d = 0; d < c.head_dim; ++d) {
            const int64_t src = (int64_t{t} * c.num_kv_heads + h) * c.head_dim + d;
            const int64_t paged =
                ((block * c.num_kv_heads + h) * c.block_size + t % c.block_size) * c.head_dim + d;
            const int64_t contig =
                ((int64_t{s} * c.num_kv_heads + h) * max_len + t) * c.head_dim + d;
            k_pool[paged] = k[s][src];
            v_pool[paged] = v[s][src];
            // Under a window, positions no query of s sees hold NaN: a
            // kernel that reads them fails.
            const bool unseen = t < FirstSeen(c, s);
            k_pool[paged] = unseen ? kNaN : k[s][src];
            v_pool[paged] = unseen ? kNaN : v[s][src];
            k_contig[contig] = unseen ? kNaN : k[s][src];
            v_contig[contig] = unseen ? kNaN : v[s][src];
          }
        }
      }
    }
    query_start.push_back(0);
    for (int32_t s = 0; s < n; ++s) query_start.push_back(query_start.back() + c.query_lens[s]);
    const int64_t row = int64_t{c.num_heads()} * c.head_dim;
    q.resize(query_start.back() * row);
    for (float& x : q) x = uni(rng);
    scale = c.score_mult / std::sqrt(static_cast<float>(c.head_dim));
  }

  PagedKvLayer Paged() const {
    return PagedKvLayer{k_pool.data(),  v_pool.data(), num_blocks,
                        c.num_kv_heads, c.block_size,  c.head_dim};
  }
  BlockTables Tables() const { return BlockTables{table.data(), c.num_seqs(), max_blocks}; }
  ContiguousKvLayer Contiguous() const {
    return ContiguousKvLayer{k_contig.data(), v_contig.data(), c.num_seqs(),
                             c.num_kv_heads,  max_len,         c.head_dim};
  }
  std::vector<float> NewOutput() const { return std::vector<float>(q.size(), kNaN); }

  // The naive reference, sequence by sequence. A decode row of an empty
  // sequence (context 0) is all zeros by the kernels' contract.
  std::vector<float> Expected() const {
    std::vector<float> out(q.size(), 0.0f);
    const int64_t row = int64_t{c.num_heads()} * c.head_dim;
    for (int32_t s = 0; s < c.num_seqs(); ++s) {
      if (c.context_lens[s] == 0) continue;
      ReferenceAttention(q.data() + query_start[s] * row, k[s].data(), v[s].data(),
                         c.context_lens[s], c.query_lens[s], c.num_heads(), c.num_kv_heads,
                         c.head_dim, scale, out.data() + query_start[s] * row,
                         c.sliding_window);
    }
    return out;
  }

  Case c;
  std::vector<std::vector<float>> k, v;
  int32_t num_blocks = 0, max_blocks = 0, max_len = 0;
  std::vector<int32_t> table, query_start;
  std::vector<float> k_pool, v_pool, k_contig, v_contig, q;
  float scale = 1.0f;
};

// Max abs difference relative to the reference's magnitude (at least 1);
// NaN anywhere counts as infinitely wrong.
double RelError(const std::vector<float>& got, const std::vector<float>& want) {
  double max_diff = 0, max_mag = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    max_diff = std::max(max_diff, std::fabs(double{got[i]} - double{want[i]}));
    max_mag = std::max(max_mag, std::fabs(double{want[i]}));
  }
  return max_diff / max_mag;
}

constexpr double kTolerance = 1e-4;

bool HasEmptySequence(const Case& c) {
  return std::find(c.context_lens.begin(), c.context_lens.end(), 0) != c.context_lens.end();
}

void ValidateOrDie(const Batch& b) {
  std::string error;
  ASSERT_TRUE(ValidatePagedKvLayer(b.Paged(), &error)) << error;
  ASSERT_TRUE(ValidateHeadCounts(b.c.num_heads(), b.c.num_kv_heads, &error)) << error;
  ASSERT_TRUE(ValidateBlockTables(b.Tables(), b.c.context_lens.data(), b.c.block_size, b.num_blocks,
                                  &error))
      << error;
  // (A decode of an empty sequence has 1 query row but context 0.)
  if (!HasEmptySequence(b.c)) {
    ASSERT_TRUE(
        ValidateQueryStarts(b.query_start.data(), b.c.context_lens.data(), b.c.num_seqs(), &error))
        << error;
  }
  ASSERT_TRUE(ValidateContiguousKvLayer(b.Contiguous(), &error)) << error;
  ASSERT_TRUE(ValidateContextLens(b.c.context_lens.data(), b.c.num_seqs(), b.max_len, &error))
      << error;
}

// --- Cases -----------------------------------------------------------------

constexpr int32_t kBlockSizes[] = {8, 16, 32};
constexpr int32_t kHeadDims[] = {64, 128, 256};
constexpr int32_t kGroups[] = {1, 2, 4, 8};

// Context lengths around block boundaries, plus long ones.
int32_t PickContext(int32_t bs, std::mt19937& rng) {
  const int32_t special[] = {1, 15, 16, 17, 1000, bs - 1, bs, bs + 1, 2 * bs, 2 * bs + 1};
  std::uniform_int_distribution<int32_t> coin(0, 2);
  if (coin(rng) != 0) {
    return special[std::uniform_int_distribution<size_t>(0, std::size(special) - 1)(rng)];
  }
  return std::uniform_int_distribution<int32_t>(1, 1100)(rng);
}

Case RandomCase(uint32_t seed, bool prefill) {
  std::mt19937 rng(seed * 7919u + (prefill ? 1u : 0u));
  auto pick = [&](const auto& options) {
    return options[std::uniform_int_distribution<size_t>(0, std::size(options) - 1)(rng)];
  };
  Case c;
  c.seed = seed;
  c.block_size = pick(kBlockSizes);
  // Now and then a head_dim of 8 mod 16 (72: the four-row loops' one-vector
  // tail) or 16 mod 32 (80).
  c.head_dim = std::uniform_int_distribution<int>(0, 4)(rng) == 0 ? pick(std::vector<int32_t>{72, 80})
                                                                 : pick(kHeadDims);
  c.group = pick(kGroups);
  c.num_kv_heads = std::uniform_int_distribution<int32_t>(1, prefill ? 2 : 3)(rng);
  c.score_mult = pick(std::vector<float>{1.0f, 1.0f, 4.0f, 12.0f});
  const int32_t n = std::uniform_int_distribution<int32_t>(1, 5)(rng);
  for (int32_t s = 0; s < n; ++s) {
    const int32_t ctx = PickContext(c.block_size, rng);
    int32_t q = 1;
    if (prefill) {  // decode, short chunk, whole prompt (short ones), or a chunk of 1..80
      switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
        case 0:
          q = 1;
          break;
        case 1:
          q = std::min(ctx, 7);
          break;
        case 2:
          q = ctx <= 128 ? ctx : 64;
          break;
        default:
          q = std::uniform_int_distribution<int32_t>(1, std::min(ctx, 80))(rng);
      }
    }
    c.context_lens.push_back(ctx);
    c.query_lens.push_back(q);
  }
  return c;
}

std::vector<Case> DecodeCases() {
  std::vector<Case> cases = {
      {16, 128, 2, 4, {1, 15, 16, 17, 1000}, {}, 1.0f, 11},
      {8, 64, 1, 8, {1, 7, 8, 9, 1000}, {}, 4.0f, 12},
      {32, 256, 1, 2, {31, 32, 33, 1000, 1}, {}, 12.0f, 13},
      {16, 64, 4, 1, {17, 300, 16}, {}, 1.0f, 14},
      {16, 80, 2, 4, {65, 64, 63}, {}, 4.0f, 15},
      {8, 40, 3, 2, {0, 5, 0, 24}, {}, 1.0f, 16},  // empty contexts give zeros
      {16, 128, 1, 4, {1500}, {}, 4.0f, 17},       // one long sequence: auto-partitioned
  };
  for (uint32_t seed = 100; seed < 118; ++seed) cases.push_back(RandomCase(seed, false));
  // Sliding windows: of 1, shorter and longer than a block, around a tile
  // (64) and a 512-position slice, longer than every context.
  const int32_t windows[] = {1, 7, 16, 63, 65, 600, 5000};
  for (uint32_t i = 0; i < std::size(windows); ++i) {
    Case c = RandomCase(300 + i, false);
    c.sliding_window = windows[i];
    cases.push_back(c);
  }
  cases.push_back({16, 128, 1, 4, {1500, 3}, {}, 4.0f, 18, 700});  // partitioned, windowed
  for (Case& c : cases) c.query_lens.assign(c.context_lens.size(), 1);
  return cases;
}

std::vector<Case> PrefillCases() {
  std::vector<Case> cases = {
      // Whole prompts (nothing cached before), lengths around block edges.
      {16, 64, 2, 4, {1, 15, 16, 17, 100}, {1, 15, 16, 17, 100}, 1.0f, 21},
      // Chunked prefill: 963 earlier tokens already in the cache.
      {32, 128, 2, 2, {1000}, {37}, 4.0f, 22},
      // Mixed batch: decode, whole prompt, chunk, idle sequence.
      {8, 256, 1, 8, {500, 40, 200, 50}, {1, 40, 17, 0}, 1.0f, 23},
      // A long chunk crossing many tiles, MHA.
      {16, 64, 2, 1, {300}, {150}, 12.0f, 24},
      // Prefix-cache hit: 16 cached tokens, 1 new one, then more.
      {16, 128, 1, 4, {17, 33, 1000}, {1, 17, 5}, 4.0f, 25},
      {8, 80, 2, 2, {9, 8, 7}, {9, 3, 7}, 1.0f, 26},
  };
  for (uint32_t seed = 200; seed < 214; ++seed) cases.push_back(RandomCase(seed, true));
  const int32_t windows[] = {1, 5, 16, 40, 64, 100, 2000};
  for (uint32_t i = 0; i < std::size(windows); ++i) {
    Case c = RandomCase(400 + i, true);
    c.sliding_window = windows[i];
    cases.push_back(c);
  }
  // A whole prompt and a chunk after cached context, windows inside them.
  cases.push_back({16, 64, 2, 4, {200, 1000}, {200, 90}, 4.0f, 27, 33});
  return cases;
}

// --- Tests -----------------------------------------------------------------

class DecodeTest : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeTest, PagedMatchesReference) {
  const Batch b(GetParam());
  ValidateOrDie(b);
  const std::vector<float> want = b.Expected();
  std::vector<float> got = b.NewOutput();
  PagedAttentionDecode(b.q.data(), b.Paged(), b.Tables(), b.c.context_lens.data(), b.c.num_heads(),
                       b.scale, got.data(), b.c.sliding_window);
  EXPECT_LT(RelError(got, want), kTolerance) << Describe(b.c);
}

// Every work split gives the reference's result: KV heads per item (each
// divisor), unpartitioned, 512-position slices (vLLM's), slices of whole
// blocks, slices cutting blocks, one position per slice.
TEST_P(DecodeTest, EverySplitMatchesReference) {
  const Batch b(GetParam());
  const std::vector<float> want = b.Expected();
  for (int32_t heads = 1; heads <= b.c.num_kv_heads; ++heads) {
    if (b.c.num_kv_heads % heads != 0) continue;
    for (int32_t part : {-1, kDefaultPartitionTokens, 2 * b.c.block_size, 40, 1}) {
      const DecodeSplit split{heads, part};
      std::string error;
      ASSERT_TRUE(ValidateDecodeSplit(split, b.c.num_kv_heads, &error)) << error;
      std::vector<float> got = b.NewOutput();
      PagedAttentionDecodeSplit(b.q.data(), b.Paged(), b.Tables(), b.c.context_lens.data(),
                                b.c.num_heads(), b.scale, split, got.data(), b.c.sliding_window);
      EXPECT_LT(RelError(got, want), kTolerance)
          << "heads/item " << heads << " partition " << part << " " << Describe(b.c);
    }
  }
}

TEST_P(DecodeTest, ContiguousMatchesReference) {
  const Batch b(GetParam());
  const std::vector<float> want = b.Expected();
  std::vector<float> got = b.NewOutput();
  ContiguousAttentionDecode(b.q.data(), b.Contiguous(), b.c.context_lens.data(), b.c.num_heads(),
                            b.scale, got.data(), b.c.sliding_window);
  EXPECT_LT(RelError(got, want), kTolerance) << Describe(b.c);
}

// A decode is a prefill of one query token: same rows, sequence by sequence
// (an empty sequence has a decode row but no prefill row).
TEST_P(DecodeTest, PrefillOfOneTokenEqualsDecode) {
  const Batch b(GetParam());
  std::vector<float> decode = b.NewOutput();
  PagedAttentionDecode(b.q.data(), b.Paged(), b.Tables(), b.c.context_lens.data(), b.c.num_heads(),
                       b.scale, decode.data(), b.c.sliding_window);
  const int64_t row = int64_t{b.c.num_heads()} * b.c.head_dim;
  for (int32_t s = 0; s < b.c.num_seqs(); ++s) {
    if (b.c.context_lens[s] == 0) continue;
    const BlockTables one{b.table.data() + int64_t{s} * b.max_blocks, 1, b.max_blocks};
    const int32_t qs[2] = {0, 1};
    std::vector<float> prefill(row, kNaN);
    PagedAttentionPrefill(b.q.data() + s * row, b.Paged(), one, qs, &b.c.context_lens[s],
                          b.c.num_heads(), b.scale, prefill.data(), b.c.sliding_window);
    const std::vector<float> want(decode.begin() + s * row, decode.begin() + (s + 1) * row);
    // A window that starts mid-block groups positions differently for the
    // vector dot products of the two paths: rounding, not a different sum.
    const double tolerance = b.c.sliding_window > 0 ? 1e-5 : 1e-6;
    EXPECT_LT(RelError(prefill, want), tolerance) << "sequence " << s << " " << Describe(b.c);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeTest, ::testing::ValuesIn(DecodeCases()));

class PrefillTest : public ::testing::TestWithParam<Case> {};

TEST_P(PrefillTest, PagedMatchesReference) {
  const Batch b(GetParam());
  ValidateOrDie(b);
  const std::vector<float> want = b.Expected();
  std::vector<float> got = b.NewOutput();
  PagedAttentionPrefill(b.q.data(), b.Paged(), b.Tables(), b.query_start.data(),
                        b.c.context_lens.data(), b.c.num_heads(), b.scale, got.data(),
                        b.c.sliding_window);
  EXPECT_LT(RelError(got, want), kTolerance) << Describe(b.c);
}

TEST_P(PrefillTest, ContiguousMatchesReference) {
  const Batch b(GetParam());
  const std::vector<float> want = b.Expected();
  std::vector<float> got = b.NewOutput();
  ContiguousAttentionPrefill(b.q.data(), b.Contiguous(), b.query_start.data(),
                             b.c.context_lens.data(), b.c.num_heads(), b.scale, got.data(),
                             b.c.sliding_window);
  EXPECT_LT(RelError(got, want), kTolerance) << Describe(b.c);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillTest, ::testing::ValuesIn(PrefillCases()));

// Chunked prefill must equal one-shot prefill: a 300-token prompt fed as
// chunks of 1, 7 and 64 tokens (each chunk sees the earlier ones through the
// cache) gives the rows the whole prompt gives at once, with and without a
// sliding window.
TEST(PrefillChunkingTest, ChunksEqualOneShot) {
  for (int32_t window : {0, 50}) {
    Case whole{16, 128, 2, 4, {300}, {300}, 4.0f, 31, window};
    const Batch b(whole);
    std::vector<float> one_shot = b.NewOutput();
    PagedAttentionPrefill(b.q.data(), b.Paged(), b.Tables(), b.query_start.data(),
                          b.c.context_lens.data(), b.c.num_heads(), b.scale, one_shot.data(),
                          window);
    const int64_t row = int64_t{whole.num_heads()} * whole.head_dim;
    for (int32_t chunk : {1, 7, 64}) {
      std::vector<float> chunked = b.NewOutput();
      for (int32_t done = 0; done < 300; done += chunk) {
        const int32_t len = std::min(chunk, 300 - done);
        const int32_t ctx = done + len;  // the cache holds the chunk's own K/V too
        const int32_t qs[2] = {0, len};
        PagedAttentionPrefill(b.q.data() + done * row, b.Paged(), b.Tables(), qs, &ctx,
                              whole.num_heads(), b.scale, chunked.data() + done * row, window);
      }
      EXPECT_LT(RelError(chunked, one_shot), 1e-5) << "chunk " << chunk << " window " << window;
    }
  }
}

// --- Validation ------------------------------------------------------------

TEST(AttentionValidationTest, RejectsBadLayer) {
  const float x = 0;
  std::string error;
  EXPECT_TRUE(ValidatePagedKvLayer({&x, &x, 4, 2, 16, 64}, &error)) << error;
  EXPECT_FALSE(ValidatePagedKvLayer({nullptr, &x, 4, 2, 16, 64}, &error));
  EXPECT_FALSE(ValidatePagedKvLayer({&x, &x, 0, 2, 16, 64}, &error));
  EXPECT_FALSE(ValidatePagedKvLayer({&x, &x, 4, 2, 0, 64}, &error));
  EXPECT_FALSE(ValidatePagedKvLayer({&x, &x, 4, 2, 16, 60}, &error));
  EXPECT_NE(error.find("multiple of 8"), std::string::npos) << error;
  EXPECT_FALSE(ValidateContiguousKvLayer({&x, &x, 1, 1, 8, 12}, &error));
  EXPECT_TRUE(ValidateContiguousKvLayer({&x, &x, 1, 1, 8, 16}, &error)) << error;
}

TEST(AttentionValidationTest, RejectsBadDecodeSplit) {
  std::string error;
  EXPECT_TRUE(ValidateDecodeSplit({}, 8, &error)) << error;
  EXPECT_TRUE(ValidateDecodeSplit({4, 512}, 8, &error)) << error;
  EXPECT_TRUE(ValidateDecodeSplit({8, -1}, 8, &error)) << error;
  EXPECT_FALSE(ValidateDecodeSplit({3, 0}, 8, &error));
  EXPECT_FALSE(ValidateDecodeSplit({-1, 0}, 8, &error));
  EXPECT_FALSE(ValidateDecodeSplit({16, 0}, 8, &error));
  EXPECT_FALSE(ValidateDecodeSplit({0, -2}, 8, &error));
}

TEST(AttentionValidationTest, RejectsBadHeadCounts) {
  std::string error;
  EXPECT_TRUE(ValidateHeadCounts(32, 8, &error)) << error;
  EXPECT_FALSE(ValidateHeadCounts(30, 8, &error));
  EXPECT_NE(error.find("multiple"), std::string::npos) << error;
  EXPECT_FALSE(ValidateHeadCounts(8, 0, &error));
  EXPECT_FALSE(ValidateHeadCounts(0, 8, &error));
}

TEST(AttentionValidationTest, RejectsBadTablesAndLengths) {
  // 2 sequences, 3 entries each, block_size 4, 5 blocks in the pool.
  const int32_t ids[] = {0, 1, -1, 4, 2, 3};
  const BlockTables tables{ids, 2, 3};
  std::string error;
  {
    const int32_t lens[] = {8, 12};  // uses 2 and 3 entries
    EXPECT_TRUE(ValidateBlockTables(tables, lens, 4, 5, &error)) << error;
  }
  {
    const int32_t lens[] = {9, 12};  // a third entry of sequence 0: -1
    EXPECT_FALSE(ValidateBlockTables(tables, lens, 4, 5, &error));
    EXPECT_NE(error.find("block -1"), std::string::npos) << error;
  }
  {
    const int32_t lens[] = {8, 12};  // block 4 is out of a 4-block pool
    EXPECT_FALSE(ValidateBlockTables(tables, lens, 4, 4, &error));
  }
  {
    const int32_t lens[] = {8, 13};  // 13 > 3 * 4
    EXPECT_FALSE(ValidateBlockTables(tables, lens, 4, 5, &error));
  }
  {
    const int32_t lens[] = {-1, 12};
    EXPECT_FALSE(ValidateBlockTables(tables, lens, 4, 5, &error));
  }
  const int32_t lens[] = {8, 12};
  EXPECT_TRUE(ValidateContextLens(lens, 2, 12, &error)) << error;
  EXPECT_FALSE(ValidateContextLens(lens, 2, 11, &error));
}

TEST(AttentionValidationTest, RejectsBadQueryStarts) {
  const int32_t lens[] = {5, 3};
  std::string error;
  {
    const int32_t qs[] = {0, 5, 8};
    EXPECT_TRUE(ValidateQueryStarts(qs, lens, 2, &error)) << error;
  }
  {
    const int32_t qs[] = {0, 6, 8};  // 6 queries, context 5
    EXPECT_FALSE(ValidateQueryStarts(qs, lens, 2, &error));
  }
  {
    const int32_t qs[] = {0, 5, 4};  // decreasing
    EXPECT_FALSE(ValidateQueryStarts(qs, lens, 2, &error));
  }
  {
    const int32_t qs[] = {-1, 0, 1};
    EXPECT_FALSE(ValidateQueryStarts(qs, lens, 2, &error));
  }
}

// The inputs of every case are valid, so the kernels are exercised on what
// the validators accept (and the cases themselves are well formed).
TEST(AttentionCasesTest, AtLeastTwentyShapesEach) {
  EXPECT_GE(DecodeCases().size(), 20u);
  EXPECT_GE(PrefillCases().size(), 20u);
}

}  // namespace
}  // namespace folio::kernels::cpu
