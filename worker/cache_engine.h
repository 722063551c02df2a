#ifndef FOLIO_WORKER_CACHE_ENGINE_H_
#define FOLIO_WORKER_CACHE_ENGINE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/step_plan.h"
#include "kernels/cache_layout.h"
#include "kernels/cpu/attention.h"
#include "kernels/kv_cache_view.h"

namespace folio {

// A CPU worker's KV cache: a device pool and a host (swap) pool, each one
// K and one V tensor per layer in the layout of kernels/cache_layout.h, fp32
// or quantized (int8 / fp8 e4m3 codes with per-block, per-KV-head scales).
// It runs the block operations of a plan; the model runner reads and writes
// the device pool through per-layer views.
//
// Thread-compatible.
class CacheEngine {
 public:
  struct Options {
    int32_t num_layers = 0;
    int32_t num_kv_heads = 0;  // this rank's
    int32_t head_dim = 0;
    int32_t block_size = 16;
    int32_t num_device_blocks = 0;
    int32_t num_host_blocks = 0;
    kernels::CacheDtype dtype = kernels::CacheDtype::kFloat32;  // fp32, int8 or fp8 e4m3
  };

  static absl::StatusOr<std::unique_ptr<CacheEngine>> Create(const Options& options);
  CacheEngine(const CacheEngine&) = delete;
  CacheEngine& operator=(const CacheEngine&) = delete;

  // Bytes of one block across all layers, K and V: what sizes the pools.
  static int64_t BytesPerBlock(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                               int32_t block_size,
                               kernels::CacheDtype dtype = kernels::CacheDtype::kFloat32);

  // swap_out, then swap_in, then copy-on-write copies, as plans require.
  absl::Status ExecuteBlockOps(const StepPlan& plan);

  // Device pool, one layer: for attention, and for the cache writes.
  kernels::PagedKvLayer Layer(int32_t layer) const;
  kernels::KvLayerView LayerView(int32_t layer);
  // fp32 pools only: the layer's elements.
  float* key_cache(int32_t layer) { return device_k_[layer].data(); }
  float* value_cache(int32_t layer) { return device_v_[layer].data(); }
  kernels::CacheDtype dtype() const { return options_.dtype; }
  const kernels::CacheShape& shape() const { return shape_; }
  const Options& options() const { return options_; }

 private:
  explicit CacheEngine(const Options& options);
  static kernels::KvCacheView MakeView(std::vector<std::vector<float>>& k,
                                       std::vector<std::vector<float>>& v, int64_t num_blocks,
                                       int64_t bytes_per_block);

  const Options options_;
  const kernels::CacheShape shape_;
  std::vector<std::vector<float>> device_k_, device_v_;  // [layer] -> pool
  std::vector<std::vector<float>> host_k_, host_v_;
  kernels::KvCacheView device_view_;
  kernels::KvCacheView host_view_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_CACHE_ENGINE_H_
