// The quantized KV cache on the CPU: the int8 / fp8 e4m3 codes, the cache
// writes that set and grow each block's per-KV-head scales, block moves that
// carry the scales, and the attention kernels reading the codes. The
// attention over a quantized cache is checked twice: against the fp32
// kernel run on the dequantized cache (same math, so fp32 rounding apart),
// and against the fp32 kernel on the unquantized values (the quantization
// error, bounded per code type).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cache_layout.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cache_ops.h"
#include "kernels/cpu/kv_quant.h"
#include "kernels/kv_cache_view.h"

namespace folio::kernels::cpu {
namespace {

// ---- codes ----

TEST(Fp8E4m3Test, EveryFiniteCodeRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN, never written
    const float v = DecodeKv(Fp8E4m3{static_cast<uint8_t>(b)});
    EXPECT_EQ(EncodeFp8E4m3(v).bits, b) << "code " << b << " value " << v;
  }
}

TEST(Fp8E4m3Test, KnownValues) {
  EXPECT_EQ(DecodeKv(Fp8E4m3{0x38}), 1.0f);
  EXPECT_EQ(DecodeKv(Fp8E4m3{0xb8}), -1.0f);
  EXPECT_EQ(DecodeKv(Fp8E4m3{0x7e}), 448.0f);
  EXPECT_EQ(DecodeKv(Fp8E4m3{0x08}), 0x1p-6f);  // smallest normal
  EXPECT_EQ(DecodeKv(Fp8E4m3{0x01}), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(DecodeKv(Fp8E4m3{0x00}), 0.0f);
  EXPECT_EQ(DecodeKv(Fp8E4m3{0x3c}), 1.5f);
}

TEST(Fp8E4m3Test, RoundsToNearestEvenAndSaturates) {
  // Between 1 (0x38, even) and 1.125 (0x39): the midpoint goes to the even code.
  EXPECT_EQ(EncodeFp8E4m3(1.0625f).bits, 0x38);
  EXPECT_EQ(EncodeFp8E4m3(1.07f).bits, 0x39);
  // Between 1.125 (0x39) and 1.25 (0x3a, even).
  EXPECT_EQ(EncodeFp8E4m3(1.1875f).bits, 0x3a);
  EXPECT_EQ(EncodeFp8E4m3(1000.0f).bits, 0x7e);
  EXPECT_EQ(EncodeFp8E4m3(-1000.0f).bits, 0xfe);
  EXPECT_EQ(EncodeFp8E4m3(0x1p-11f).bits, 0x00);      // below half the smallest subnormal
  EXPECT_EQ(EncodeFp8E4m3(3 * 0x1p-10f).bits, 0x02);  // 1.5 subnormal steps: ties to even
  // Every value lands on a nearest code.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-448.0f, 448.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng) * (i % 2 == 0 ? 1.0f : 0x1p-8f);
    const float got = DecodeKv(EncodeFp8E4m3(x));
    for (int b = 0; b < 256; ++b) {
      if ((b & 0x7f) == 0x7f) continue;
      ASSERT_LE(std::fabs(got - x), std::fabs(DecodeKv(Fp8E4m3{static_cast<uint8_t>(b)}) - x))
          << "x " << x << " encoded as " << got;
    }
  }
}

TEST(Int8CodeTest, RoundsAndSaturates) {
  EXPECT_EQ(EncodeInt8(126.5f), 126);
  EXPECT_EQ(EncodeInt8(125.5f), 126);
  EXPECT_EQ(EncodeInt8(-3.4f), -3);
  EXPECT_EQ(EncodeInt8(127.7f), 127);
  EXPECT_EQ(EncodeInt8(-500.0f), -127);
  EXPECT_EQ(DecodeKv(int8_t{-127}), -127.0f);
}

TEST(CacheLayoutTest, QuantizedBlocksHoldCodesAndScales) {
  const CacheShape shape{4, 16, 64};
  EXPECT_EQ(BlockBytes(shape, CacheDtype::kFloat32), 4 * 16 * 64 * 4);
  EXPECT_EQ(BlockBytes(shape, CacheDtype::kInt8), 4 * 16 * 64 + 64);  // 16 bytes of scales, padded
  EXPECT_EQ(BlockBytes(shape, CacheDtype::kFp8E4m3), BlockBytes(shape, CacheDtype::kInt8));
  EXPECT_EQ(BlockBytes(CacheShape{3, 1, 8}, CacheDtype::kInt8), 64);
  EXPECT_TRUE(IsQuantized(CacheDtype::kInt8));
  EXPECT_FALSE(IsQuantized(CacheDtype::kBFloat16));
}

// ---- a paged pool of one layer ----

struct Pool {
  Pool(const CacheShape& shape, CacheDtype dtype, int64_t num_blocks)
      : shape(shape), dtype(dtype), num_blocks(num_blocks),
        block_bytes(BlockBytes(shape, dtype)),
        k(num_blocks * block_bytes / 4, 0.0f),
        v(num_blocks * block_bytes / 4, 0.0f) {}
  KvLayerView View() { return KvLayerView{k.data(), v.data(), num_blocks, block_bytes}; }
  KvCacheView CacheView() {
    KvCacheView view;
    view.k[0] = k.data();
    view.v[0] = v.data();
    view.num_layers = 1;
    view.num_blocks = num_blocks;
    view.bytes_per_block = block_bytes;
    return view;
  }
  PagedKvLayer Attention() const {
    return PagedKvLayer{k.data(), v.data(), static_cast<int32_t>(num_blocks), shape.num_kv_heads,
                        shape.block_size, shape.head_dim, dtype};
  }
  // The value a slot holds for element i of its token (K or V).
  float Read(bool key, int64_t slot, int64_t i) const {
    const uint8_t* base = reinterpret_cast<const uint8_t*>(key ? k.data() : v.data());
    const int64_t block = slot / shape.block_size, head = i / shape.head_dim;
    if (dtype == CacheDtype::kFloat32) {
      return reinterpret_cast<const float*>(base)[SlotElemIndex(shape, slot, i)];
    }
    const uint8_t* b = base + block * block_bytes;
    float scale;
    std::memcpy(&scale, b + BlockElems(shape) + 4 * head, 4);
    const int64_t at = SlotElemIndex(shape, slot, i) - block * BlockElems(shape);
    const float code = dtype == CacheDtype::kInt8 ? DecodeKv(static_cast<int8_t>(b[at]))
                                                  : DecodeKv(Fp8E4m3{b[at]});
    return code * scale;
  }
  float Scale(bool key, int64_t block, int32_t head) const {
    const uint8_t* base = reinterpret_cast<const uint8_t*>(key ? k.data() : v.data());
    float scale;
    std::memcpy(&scale, base + block * block_bytes + BlockElems(shape) + 4 * head, 4);
    return scale;
  }

  CacheShape shape;
  CacheDtype dtype;
  int64_t num_blocks, block_bytes;
  std::vector<float> k, v;
};

// |decoded - x| allowed for a value x of a head whose block scale is `scale`:
// half a step for int8 (one step once the block grew), and for fp8 half a
// unit in the last of its 3 mantissa bits (subnormals: half of 2^-9 steps).
float Tolerance(CacheDtype dtype, float x, float scale, bool grew) {
  if (dtype == CacheDtype::kInt8) return scale * (grew ? 1.0f : 0.5f) * 1.0001f;
  return std::max(std::fabs(x) / 16.0f, scale * 0x1p-10f) * (grew ? 2.0f : 1.0f) * 1.0001f;
}

class QuantizedWriteTest : public ::testing::TestWithParam<CacheDtype> {};

TEST_P(QuantizedWriteTest, OneWriteKeepsEveryValueWithinHalfAStep) {
  const CacheDtype dtype = GetParam();
  const CacheShape shape{2, 8, 16};
  Pool pool(shape, dtype, 4);
  const int64_t n = TokenElems(shape), tokens = 10;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> key(tokens * n), value(tokens * n);
  for (float& x : key) x = dist(rng);
  for (float& x : value) x = dist(rng) * 0.01f;
  // Tokens 0-7 fill block 2, tokens 8-9 start block 0; one padding token.
  std::vector<int64_t> slots = {16, 17, 18, 19, 20, 21, 22, 23, 0, 1};
  slots[5] = kSkipSlot;
  std::string error;
  ASSERT_TRUE(ReshapeAndCache(key.data(), value.data(), slots.data(), tokens, shape, dtype,
                              pool.View(), &error))
      << error;
  for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
    for (int64_t block : {2, 0}) {
      // The scale is the head's absolute maximum over the block's tokens / the largest code.
      float absmax = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        if (slots[t] == kSkipSlot || slots[t] / shape.block_size != block) continue;
        for (int32_t d = 0; d < shape.head_dim; ++d) {
          absmax = std::max(absmax, std::fabs(key[t * n + h * shape.head_dim + d]));
        }
      }
      EXPECT_FLOAT_EQ(pool.Scale(true, block, h), absmax / QuantizedMax(dtype));
    }
  }
  for (int64_t t = 0; t < tokens; ++t) {
    if (slots[t] == kSkipSlot) continue;
    for (int64_t i = 0; i < n; ++i) {
      const float sk = pool.Scale(true, slots[t] / shape.block_size, i / shape.head_dim);
      const float sv = pool.Scale(false, slots[t] / shape.block_size, i / shape.head_dim);
      ASSERT_NEAR(pool.Read(true, slots[t], i), key[t * n + i], Tolerance(dtype, key[t * n + i], sk, false));
      ASSERT_NEAR(pool.Read(false, slots[t], i), value[t * n + i],
                  Tolerance(dtype, value[t * n + i], sv, false));
    }
  }
  // The padding token's slot was not written.
  EXPECT_EQ(pool.Read(true, 21, 0), 0.0f);
}

TEST_P(QuantizedWriteTest, GrowingBlockRescalesEarlierTokens) {
  const CacheDtype dtype = GetParam();
  const CacheShape shape{1, 8, 8};
  Pool pool(shape, dtype, 2);
  const int64_t n = TokenElems(shape);
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // Token t's values grow with t, so the block grows several times, one
  // token a step as in decode.
  std::vector<float> key(8 * n);
  for (int64_t t = 0; t < 8; ++t) {
    for (int64_t i = 0; i < n; ++i) key[t * n + i] = dist(rng) * std::pow(3.0f, float(t));
  }
  std::string error;
  float last_scale = 0;
  int growths = 0;
  for (int64_t t = 0; t < 8; ++t) {
    const int64_t slot = 8 + t;  // block 1
    ASSERT_TRUE(ReshapeAndCache(key.data() + t * n, key.data() + t * n, &slot, 1, shape, dtype,
                                pool.View(), &error))
        << error;
    const float scale = pool.Scale(true, 1, 0);
    if (t > 0 && scale != last_scale) {
      ++growths;
      const float ratio = scale / last_scale;
      EXPECT_EQ(ratio, std::exp2(std::round(std::log2(ratio)))) << "growth by a power of two";
    }
    last_scale = scale;
  }
  EXPECT_GE(growths, 3);
  float absmax = 0;
  for (float x : key) absmax = std::max(absmax, std::fabs(x));
  EXPECT_GE(last_scale * QuantizedMax(dtype), absmax);
  EXPECT_LT(last_scale * QuantizedMax(dtype), 2 * absmax);
  for (int64_t t = 0; t < 8; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(pool.Read(true, 8 + t, i), key[t * n + i],
                  Tolerance(dtype, key[t * n + i], last_scale, true))
          << "token " << t << " element " << i;
    }
  }
}

TEST_P(QuantizedWriteTest, WriteAtOffsetZeroStartsTheBlockAfresh) {
  const CacheDtype dtype = GetParam();
  const CacheShape shape{1, 4, 8};
  Pool pool(shape, dtype, 1);
  std::vector<float> big(8, 100.0f), small(8, 0.5f);
  const int64_t slot0 = 0, slot1 = 1;
  std::string error;
  ASSERT_TRUE(ReshapeAndCache(big.data(), big.data(), &slot0, 1, shape, dtype, pool.View(), &error));
  // The block is freed and reused by another sequence: its first write resets the scale.
  ASSERT_TRUE(ReshapeAndCache(small.data(), small.data(), &slot0, 1, shape, dtype, pool.View(), &error));
  EXPECT_FLOAT_EQ(pool.Scale(true, 0, 0), 0.5f / QuantizedMax(dtype));
  // An append (offset 1) that fits keeps it.
  ASSERT_TRUE(ReshapeAndCache(small.data(), small.data(), &slot1, 1, shape, dtype, pool.View(), &error));
  EXPECT_FLOAT_EQ(pool.Scale(true, 0, 0), 0.5f / QuantizedMax(dtype));
  EXPECT_FLOAT_EQ(pool.Read(false, 1, 3), 0.5f);
}

TEST_P(QuantizedWriteTest, BlockMovesCarryTheScales) {
  const CacheDtype dtype = GetParam();
  const CacheShape shape{2, 4, 8};
  Pool device(shape, dtype, 4), host(shape, dtype, 3);
  const int64_t n = TokenElems(shape);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> key(4 * n), value(4 * n);
  for (float& x : key) x = dist(rng);
  for (float& x : value) x = dist(rng) * 5.0f;
  const std::vector<int64_t> slots = {4, 5, 6, 7};  // block 1
  std::string error;
  ASSERT_TRUE(ReshapeAndCache(key.data(), value.data(), slots.data(), 4, shape, dtype,
                              device.View(), &error));
  std::vector<float> before(4 * n);
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t i = 0; i < n; ++i) before[t * n + i] = device.Read(false, 4 + t, i);
  }
  const std::vector<BlockPair> out = {{1, 2}}, in = {{2, 3}}, copy = {{3, 0}};
  ASSERT_TRUE(SwapBlocks(device.CacheView(), host.CacheView(), out, &error)) << error;
  ASSERT_TRUE(SwapBlocks(host.CacheView(), device.CacheView(), in, &error)) << error;
  ASSERT_TRUE(CopyBlocks(device.CacheView(), copy, &error)) << error;
  for (int64_t block : {3, 0}) {
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(device.Read(false, block * 4 + t, i), before[t * n + i]);
      }
    }
  }
}

TEST_P(QuantizedWriteTest, RejectsABlockSizeThatIsNotQuantized) {
  const CacheDtype dtype = GetParam();
  const CacheShape shape{2, 4, 8};
  Pool fp32(shape, CacheDtype::kFloat32, 2);
  std::vector<float> x(TokenElems(shape), 1.0f);
  const int64_t slot = 0;
  std::string error;
  EXPECT_FALSE(ReshapeAndCache(x.data(), x.data(), &slot, 1, shape, dtype, fp32.View(), &error));
  EXPECT_NE(error.find("bytes_per_block"), std::string::npos) << error;
  Pool pool(shape, dtype, 2);
  const int64_t bad = 8;  // 2 blocks of 4 slots
  EXPECT_FALSE(ReshapeAndCache(x.data(), x.data(), &bad, 1, shape, dtype, pool.View(), &error));
  EXPECT_FALSE(ReshapeAndCache(x.data(), x.data(), &slot, 1, shape, CacheDtype::kBFloat16,
                               pool.View(), &error));
}

INSTANTIATE_TEST_SUITE_P(Codes, QuantizedWriteTest,
                         ::testing::Values(CacheDtype::kInt8, CacheDtype::kFp8E4m3),
                         [](const auto& info) {
                           return std::string(info.param == CacheDtype::kInt8 ? "Int8" : "Fp8");
                         });

// ---- attention over a quantized cache ----

struct AttentionCase {
  CacheDtype dtype;
  int32_t num_heads, num_kv_heads, head_dim, block_size;
  std::vector<int32_t> context_lens;
  std::vector<int32_t> query_lens;  // prefill: tokens of the last chunk (decode: all 1)
  int32_t sliding_window = 0;
};

std::string Name(const AttentionCase& c) {
  std::string s = c.dtype == CacheDtype::kInt8 ? "int8" : "fp8";
  s += "_h" + std::to_string(c.num_heads) + "_kv" + std::to_string(c.num_kv_heads) + "_d" +
       std::to_string(c.head_dim) + "_b" + std::to_string(c.block_size) + "_s" +
       std::to_string(c.context_lens.size());
  int32_t q = 0;
  for (int32_t l : c.query_lens) q += l;
  s += "_q" + std::to_string(q);
  if (c.sliding_window > 0) s += "_w" + std::to_string(c.sliding_window);
  return s;
}

// Runs a case on three caches holding the same tokens: quantized, fp32 with
// the dequantized values, fp32 with the original ones.
struct AttentionRun {
  std::vector<float> quantized, dequantized, original;
};

AttentionRun RunAttention(const AttentionCase& c, uint32_t seed) {
  const CacheShape shape{c.num_kv_heads, c.block_size, c.head_dim};
  const int32_t num_seqs = static_cast<int32_t>(c.context_lens.size());
  int32_t max_blocks = 0, total_blocks = 0;
  for (int32_t len : c.context_lens) {
    max_blocks = std::max(max_blocks, (len + c.block_size - 1) / c.block_size);
    total_blocks += (len + c.block_size - 1) / c.block_size;
  }
  const int64_t num_blocks = total_blocks + 3;
  std::mt19937 rng(seed);
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  std::vector<int32_t> tables(int64_t{num_seqs} * max_blocks, -1);
  Pool quant(shape, c.dtype, num_blocks), deq(shape, CacheDtype::kFloat32, num_blocks),
      orig(shape, CacheDtype::kFloat32, num_blocks);
  const int64_t n = TokenElems(shape);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> chunk(1, 2 * c.block_size);
  std::string error;
  int32_t next_free = 0;
  for (int32_t s = 0; s < num_seqs; ++s) {
    const int32_t len = c.context_lens[s];
    for (int32_t b = 0; b < (len + c.block_size - 1) / c.block_size; ++b) {
      tables[int64_t{s} * max_blocks + b] = free_blocks[next_free++];
    }
    // Tokens written in chunks of random length (prefill chunks, then
    // decode steps), values of a magnitude that drifts with the position so
    // blocks grow.
    std::vector<float> key(int64_t{len} * n), value(int64_t{len} * n);
    for (int32_t t = 0; t < len; ++t) {
      const float magnitude = 0.5f + 1.5f * std::fabs(std::sin(0.05f * t + s));
      for (int64_t i = 0; i < n; ++i) {
        key[t * n + i] = dist(rng) * magnitude;
        value[t * n + i] = dist(rng) * magnitude;
      }
    }
    std::vector<int64_t> slots(len);
    for (int32_t t = 0; t < len; ++t) {
      slots[t] = int64_t{tables[int64_t{s} * max_blocks + t / c.block_size]} * c.block_size +
                 t % c.block_size;
    }
    for (int32_t t0 = 0; t0 < len;) {
      const int32_t count = std::min(len - t0, chunk(rng));
      EXPECT_TRUE(ReshapeAndCache(key.data() + t0 * n, value.data() + t0 * n, slots.data() + t0,
                                  count, shape, c.dtype, quant.View(), &error))
          << error;
      t0 += count;
    }
    EXPECT_TRUE(ReshapeAndCache(key.data(), value.data(), slots.data(), len, shape, orig.View(),
                                &error));
    // The dequantized copy.
    std::vector<float> dk(int64_t{len} * n), dv(int64_t{len} * n);
    for (int32_t t = 0; t < len; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        dk[t * n + i] = quant.Read(true, slots[t], i);
        dv[t * n + i] = quant.Read(false, slots[t], i);
      }
    }
    EXPECT_TRUE(ReshapeAndCache(dk.data(), dv.data(), slots.data(), len, shape, deq.View(), &error));
  }
  std::vector<int32_t> query_start(num_seqs + 1, 0);
  for (int32_t s = 0; s < num_seqs; ++s) query_start[s + 1] = query_start[s] + c.query_lens[s];
  const int64_t q_elems = int64_t{query_start[num_seqs]} * c.num_heads * c.head_dim;
  std::vector<float> q(q_elems);
  for (float& x : q) x = dist(rng);
  const BlockTables bt{tables.data(), num_seqs, max_blocks};
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  const bool decode = query_start[num_seqs] == num_seqs;
  auto run = [&](const Pool& pool) {
    std::vector<float> out(q_elems, std::nanf(""));
    const PagedKvLayer kv = pool.Attention();
    EXPECT_TRUE(ValidatePagedKvLayer(kv, &error)) << error;
    if (decode) {
      PagedAttentionDecode(q.data(), kv, bt, c.context_lens.data(), c.num_heads, scale, out.data(),
                           c.sliding_window);
    } else {
      PagedAttentionPrefill(q.data(), kv, bt, query_start.data(), c.context_lens.data(),
                            c.num_heads, scale, out.data(), c.sliding_window);
    }
    return out;
  };
  return AttentionRun{run(quant), run(deq), run(orig)};
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= m)) m = std::isnan(a[i] - b[i]) ? INFINITY : std::fabs(a[i] - b[i]);
  }
  return m;
}

// sqrt(sum (a - b)^2 / sum b^2): the error relative to the output's size.
double RelativeRms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += double(a[i] - b[i]) * (a[i] - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

class QuantizedAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(QuantizedAttentionTest, EqualsFp32OnTheDequantizedCache) {
  const AttentionCase& c = GetParam();
  const AttentionRun r = RunAttention(c, 11);
  EXPECT_LE(MaxAbsDiff(r.quantized, r.dequantized), 2e-5f);
  // Against the unquantized cache: the codes' own resolution (int8: 1/127
  // of a block's largest value; fp8: 3 mantissa bits, 1/16 relative) carried
  // through the scores' softmax and the values' mixture.
  const double rms = RelativeRms(r.quantized, r.original);
  std::printf("%s: relative RMS error %.4f, max |error| %.4f\n", Name(c).c_str(), rms,
              MaxAbsDiff(r.quantized, r.original));
  EXPECT_LE(rms, c.dtype == CacheDtype::kInt8 ? 0.03 : 0.1);
  EXPECT_GT(rms, 0.0) << "the cache was not quantized";
}

std::vector<AttentionCase> AttentionCases() {
  std::vector<AttentionCase> cases;
  for (CacheDtype dt : {CacheDtype::kInt8, CacheDtype::kFp8E4m3}) {
    // Decode: one sequence (partitioned context), many sequences, GQA and MHA.
    cases.push_back({dt, 8, 2, 64, 16, {1500}, {1}});
    cases.push_back({dt, 16, 4, 64, 16, {37, 200, 1, 64, 129, 90, 17, 300}, {1, 1, 1, 1, 1, 1, 1, 1}});
    cases.push_back({dt, 4, 4, 128, 8, {50, 77, 3}, {1, 1, 1}});
    cases.push_back({dt, 32, 8, 128, 16, {260, 33}, {1, 1}, 100});
    // head_dim 8 mod 16: the four-row loops' one-vector tail.
    cases.push_back({dt, 8, 2, 72, 16, {70, 5}, {1, 1}});
    // Prefill: long chunks (the tiled path), short ones and mixed batches (the generic path).
    cases.push_back({dt, 8, 2, 64, 16, {120, 70}, {120, 30}});
    cases.push_back({dt, 4, 4, 64, 16, {45, 9, 200}, {5, 1, 64}});
    cases.push_back({dt, 16, 4, 128, 32, {300}, {100}, 64});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, QuantizedAttentionTest, ::testing::ValuesIn(AttentionCases()),
                         [](const auto& info) { return Name(info.param); });

}  // namespace
}  // namespace folio::kernels::cpu
