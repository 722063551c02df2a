#include "kernels/kv_cache_view.h"

#include <algorithm>
#include <vector>

#include "kernels/fail.h"

namespace folio::kernels {

bool KvCacheView::Validate(std::string* error) const {
  if (num_layers < 1 || num_layers > kMaxLayers) {
    return Fail(error, "num_layers " + std::to_string(num_layers) +
                           " outside [1, " + std::to_string(kMaxLayers) + "]");
  }
  if (num_blocks <= 0) return Fail(error, "num_blocks must be positive");
  if (bytes_per_block <= 0) return Fail(error, "bytes_per_block must be positive");
  for (int32_t l = 0; l < num_layers; ++l) {
    if (k[l] == nullptr || v[l] == nullptr) {
      return Fail(error, "null K or V pointer for layer " + std::to_string(l));
    }
  }
  return true;
}

bool ValidateLayerView(const KvLayerView& layer, std::string* error) {
  if (layer.k == nullptr || layer.v == nullptr) return Fail(error, "null K or V pointer");
  if (layer.num_blocks <= 0) return Fail(error, "num_blocks must be positive");
  if (layer.bytes_per_block <= 0) return Fail(error, "bytes_per_block must be positive");
  return true;
}

bool ValidateBlockPairs(std::span<const BlockPair> pairs, int64_t src_blocks,
                        int64_t dst_blocks, bool same_pool, std::string* error) {
  for (size_t i = 0; i < pairs.size(); ++i) {
    const BlockPair& p = pairs[i];
    if (p.src < 0 || p.src >= src_blocks || p.dst < 0 || p.dst >= dst_blocks) {
      return Fail(error, "pair " + std::to_string(i) + " {" + std::to_string(p.src) +
                             ", " + std::to_string(p.dst) + "} out of range (" +
                             std::to_string(src_blocks) + " src, " +
                             std::to_string(dst_blocks) + " dst blocks)");
    }
  }
  // Sorted copies: plans carry few pairs per step, so this stays cheap.
  std::vector<int64_t> dsts;
  dsts.reserve(pairs.size());
  for (const BlockPair& p : pairs) dsts.push_back(p.dst);
  std::sort(dsts.begin(), dsts.end());
  if (auto it = std::adjacent_find(dsts.begin(), dsts.end()); it != dsts.end()) {
    return Fail(error, "dst block " + std::to_string(*it) + " written twice");
  }
  if (same_pool) {
    for (const BlockPair& p : pairs) {
      if (std::binary_search(dsts.begin(), dsts.end(), p.src)) {
        return Fail(error, "block " + std::to_string(p.src) + " is both a src and a dst");
      }
    }
  }
  return true;
}

bool ValidateCacheShape(const CacheShape& shape, CacheDtype dtype, int64_t bytes_per_block,
                        std::string* error) {
  if (shape.num_kv_heads <= 0 || shape.block_size <= 0 || shape.head_dim <= 0) {
    return Fail(error, "cache shape must be positive");
  }
  if (BlockBytes(shape, dtype) != bytes_per_block) {
    return Fail(error, "bytes_per_block " + std::to_string(bytes_per_block) +
                           " does not match the " + std::to_string(BlockBytes(shape, dtype)) +
                           " bytes of a " + CacheDtypeName(dtype) + " block of this shape");
  }
  return true;
}

}  // namespace folio::kernels
