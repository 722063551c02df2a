#include "kernels/cpu/cache_ops.h"

#include <cstring>

namespace folio::kernels::cpu {
namespace {

bool Fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// Copies one block of one tensor between two pools (or within one).
inline void CopyBlock(const void* src_base, int64_t src_block, void* dst_base,
                      int64_t dst_block, int64_t bytes) {
  std::memcpy(static_cast<char*>(dst_base) + dst_block * bytes,
              static_cast<const char*>(src_base) + src_block * bytes,
              static_cast<size_t>(bytes));
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
  if (!ValidateLayerView(layer, error) ||
      !ValidateCacheShape(shape, sizeof(float), layer.bytes_per_block, error)) {
    return false;
  }
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
