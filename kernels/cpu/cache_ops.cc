#include "kernels/cpu/cache_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/kv_quant.h"
#include "kernels/fail.h"

namespace folio::kernels::cpu {
namespace {

// Copies one block of one tensor between two pools (or within one).
inline void CopyBlock(const void* src_base, int64_t src_block, void* dst_base,
                      int64_t dst_block, int64_t bytes) {
  std::memcpy(static_cast<char*>(dst_base) + dst_block * bytes,
              static_cast<const char*>(src_base) + src_block * bytes,
              static_cast<size_t>(bytes));
}

// Writes tokens [t0, t1), all in block `block`, of one tensor (K or V) into
// a quantized layer: per KV head, set (fresh: the run covers offset 0) or
// grow the block's scale, then encode.
template <class Code>
void WriteQuantizedRun(const float* src, const int64_t* slots, int64_t t0, int64_t t1,
                       int64_t block, bool fresh, const CacheShape& shape, float qmax,
                       uint8_t* pool, int64_t bytes_per_block) {
  uint8_t* base = pool + block * bytes_per_block;
  Code* codes = reinterpret_cast<Code*>(base);
  float* scales = reinterpret_cast<float*>(base + BlockElems(shape));
  const int64_t n = TokenElems(shape), hd = shape.head_dim;
  const int64_t head_codes = int64_t{shape.block_size} * hd;
  for (int32_t h = 0; h < shape.num_kv_heads; ++h) {
    float absmax = 0.0f;
    for (int64_t t = t0; t < t1; ++t) {
      if (slots[t] == kSkipSlot) continue;
      const float* x = src + t * n + h * hd;
#pragma omp simd reduction(max : absmax)
      for (int64_t d = 0; d < hd; ++d) absmax = std::max(absmax, std::fabs(x[d]));
    }
    const float old = fresh ? 0.0f : scales[h];
    const float needed = absmax / qmax;
    float scale = old;
    if (old == 0.0f) {
      scale = needed;
    } else if (needed > old) {
      // Grow by 2^k: the earlier codes of this head are divided by 2^k.
      int exponent = 0;
      std::frexp(needed / old, &exponent);
      scale = std::ldexp(old, exponent);
      if (scale < needed) scale *= 2.0f;
      const float ratio = old / scale;
      Code* c = codes + h * head_codes;
#pragma omp simd
      for (int64_t i = 0; i < head_codes; ++i) c[i] = EncodeKv<Code>(DecodeKv(c[i]) * ratio);
    }
    scales[h] = scale;
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (int64_t t = t0; t < t1; ++t) {
      if (slots[t] == kSkipSlot) continue;
      const float* x = src + t * n + h * hd;
      Code* c = codes + h * head_codes + (slots[t] % shape.block_size) * hd;
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) c[d] = EncodeKv<Code>(x[d] * inv);
    }
  }
}

template <class Code>
void WriteQuantized(const float* key, const float* value, const int64_t* slots, int64_t num_tokens,
                    const CacheShape& shape, float qmax, const KvLayerView& layer) {
  // Runs of consecutive tokens in one block: a sequence's tokens of a step.
  for (int64_t t0 = 0; t0 < num_tokens;) {
    if (slots[t0] == kSkipSlot) {
      ++t0;
      continue;
    }
    const int64_t block = slots[t0] / shape.block_size;
    int64_t t1 = t0 + 1, lowest = slots[t0] % shape.block_size;
    for (; t1 < num_tokens; ++t1) {
      if (slots[t1] == kSkipSlot) continue;
      if (slots[t1] / shape.block_size != block) break;
      lowest = std::min(lowest, slots[t1] % shape.block_size);
    }
    const bool fresh = lowest == 0;
    WriteQuantizedRun<Code>(key, slots, t0, t1, block, fresh, shape, qmax,
                      static_cast<uint8_t*>(layer.k), layer.bytes_per_block);
    WriteQuantizedRun<Code>(value, slots, t0, t1, block, fresh, shape, qmax,
                      static_cast<uint8_t*>(layer.v), layer.bytes_per_block);
    t0 = t1;
  }
}

}  // namespace

bool CopyBlocks(const KvCacheView& view, std::span<const BlockPair> pairs,
                std::string* error) {
  if (!ValidateBlockPairs(pairs, view.num_blocks, view.num_blocks,
                          /*same_pool=*/true, error)) {
    return false;
  }
  for (int32_t l = 0; l < view.num_layers; ++l) {
    for (const BlockPair& p : pairs) {
      CopyBlock(view.k[l], p.src, view.k[l], p.dst, view.bytes_per_block);
      CopyBlock(view.v[l], p.src, view.v[l], p.dst, view.bytes_per_block);
    }
  }
  return true;
}

bool SwapBlocks(const KvCacheView& src, const KvCacheView& dst,
                std::span<const BlockPair> pairs, std::string* error) {
  if (src.num_layers != dst.num_layers || src.bytes_per_block != dst.bytes_per_block) {
    return Fail(error, "swap pools differ in num_layers or bytes_per_block");
  }
  if (!ValidateBlockPairs(pairs, src.num_blocks, dst.num_blocks,
                          /*same_pool=*/false, error)) {
    return false;
  }
  for (int32_t l = 0; l < src.num_layers; ++l) {
    for (const BlockPair& p : pairs) {
      CopyBlock(src.k[l], p.src, dst.k[l], p.dst, src.bytes_per_block);
      CopyBlock(src.v[l], p.src, dst.v[l], p.dst, src.bytes_per_block);
    }
  }
  return true;
}

bool ReshapeAndCache(const float* key, const float* value,
                     const int64_t* slot_mapping, int64_t num_tokens,
                     const CacheShape& shape, const KvLayerView& layer,
                     std::string* error) {
  return ReshapeAndCache(key, value, slot_mapping, num_tokens, shape, CacheDtype::kFloat32, layer,
                         error);
}

bool ReshapeAndCache(const float* key, const float* value,
                     const int64_t* slot_mapping, int64_t num_tokens,
                     const CacheShape& shape, CacheDtype dtype, const KvLayerView& layer,
                     std::string* error) {
  if (!ValidateLayerView(layer, error)) return false;
  if (dtype != CacheDtype::kFloat32 && !IsQuantized(dtype)) {
    return Fail(error, "the CPU cache stores fp32, int8 or fp8 e4m3");
  }
  if (!ValidateCacheShape(shape, dtype, layer.bytes_per_block, error)) return false;
  if (num_tokens < 0) return Fail(error, "num_tokens must be non-negative");
  if (num_tokens > 0 && (key == nullptr || value == nullptr || slot_mapping == nullptr)) {
    return Fail(error, "null key, value or slot_mapping");
  }
  // Check every slot before writing any, so a bad plan changes nothing.
  const int64_t num_slots = layer.num_blocks * shape.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot < kSkipSlot || slot >= num_slots) {
      return Fail(error, "token " + std::to_string(t) + " slot " + std::to_string(slot) +
                             " outside [-1, " + std::to_string(num_slots) + ")");
    }
  }
  if (dtype == CacheDtype::kInt8) {
    WriteQuantized<int8_t>(key, value, slot_mapping, num_tokens, shape, QuantizedMax(dtype),
                           layer);
    return true;
  }
  if (dtype == CacheDtype::kFp8E4m3) {
    WriteQuantized<Fp8E4m3>(key, value, slot_mapping, num_tokens, shape, QuantizedMax(dtype),
                            layer);
    return true;
  }
  const int64_t n = TokenElems(shape);
  float* k_cache = static_cast<float*>(layer.k);
  float* v_cache = static_cast<float*>(layer.v);
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slot_mapping[t];
    if (slot == kSkipSlot) continue;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t dst = SlotElemIndex(shape, slot, i);
      k_cache[dst] = key[t * n + i];
      v_cache[dst] = value[t * n + i];
    }
  }
  return true;
}

}  // namespace folio::kernels::cpu
