#include "worker/cache_engine.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cache_ops.h"

namespace folio {
namespace {

std::vector<kernels::BlockPair> ToPairs(const std::vector<BlockCopy>& ops) {
  std::vector<kernels::BlockPair> pairs;
  pairs.reserve(ops.size());
  for (const BlockCopy& op : ops) pairs.push_back({op.src, op.dst});
  return pairs;
}

}  // namespace

int64_t CacheEngine::BytesPerBlock(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                                   int32_t block_size, kernels::CacheDtype dtype) {
  return int64_t{2} * num_layers *
         kernels::BlockBytes(kernels::CacheShape{num_kv_heads, block_size, head_dim}, dtype);
}

CacheEngine::CacheEngine(const Options& options)
    : options_(options), shape_{options.num_kv_heads, options.block_size, options.head_dim} {}

absl::StatusOr<std::unique_ptr<CacheEngine>> CacheEngine::Create(const Options& options) {
  if (options.num_layers <= 0 || options.num_layers > kernels::KvCacheView::kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat("num_layers must be in [1, ",
                                                   kernels::KvCacheView::kMaxLayers, "], got ",
                                                   options.num_layers));
  }
  if (options.num_kv_heads <= 0 || options.head_dim <= 0 || options.block_size <= 0 ||
      options.num_device_blocks <= 0 || options.num_host_blocks < 0) {
    return absl::InvalidArgumentError("cache shape and pool sizes must be positive");
  }
  if (options.dtype != kernels::CacheDtype::kFloat32 && !kernels::IsQuantized(options.dtype)) {
    return absl::InvalidArgumentError("the CPU KV cache stores fp32, int8 or fp8 e4m3");
  }
  auto engine = std::unique_ptr<CacheEngine>(new CacheEngine(options));
  // Stored in floats (aligned for fp32; a quantized block is a multiple of
  // 64 bytes, so of 4), zeroed: a quantized block's scales start at 0.
  const int64_t bytes_per_block = kernels::BlockBytes(engine->shape_, options.dtype);
  const int64_t floats_per_block = bytes_per_block / static_cast<int64_t>(sizeof(float));
  for (int32_t l = 0; l < options.num_layers; ++l) {
    engine->device_k_.emplace_back(floats_per_block * options.num_device_blocks, 0.0f);
    engine->device_v_.emplace_back(floats_per_block * options.num_device_blocks, 0.0f);
    // An empty host pool still needs valid pointers for the view.
    const int64_t host_blocks = std::max(1, options.num_host_blocks);
    engine->host_k_.emplace_back(floats_per_block * host_blocks, 0.0f);
    engine->host_v_.emplace_back(floats_per_block * host_blocks, 0.0f);
  }
  engine->device_view_ = MakeView(engine->device_k_, engine->device_v_, options.num_device_blocks,
                                  bytes_per_block);
  engine->host_view_ = MakeView(engine->host_k_, engine->host_v_,
                                std::max(1, options.num_host_blocks), bytes_per_block);
  std::string error;
  if (!engine->device_view_.Validate(&error) || !engine->host_view_.Validate(&error)) {
    return absl::InternalError(absl::StrCat("KV cache view: ", error));
  }
  return engine;
}

kernels::KvCacheView CacheEngine::MakeView(std::vector<std::vector<float>>& k,
                                           std::vector<std::vector<float>>& v,
                                           int64_t num_blocks, int64_t bytes_per_block) {
  kernels::KvCacheView view;
  view.num_layers = static_cast<int32_t>(k.size());
  view.num_blocks = num_blocks;
  view.bytes_per_block = bytes_per_block;
  for (size_t l = 0; l < k.size(); ++l) {
    view.k[l] = k[l].data();
    view.v[l] = v[l].data();
  }
  return view;
}

absl::Status CacheEngine::ExecuteBlockOps(const StepPlan& plan) {
  std::string error;
  if (!plan.swap_out.empty() &&
      !kernels::cpu::SwapBlocks(device_view_, host_view_, ToPairs(plan.swap_out), &error)) {
    return absl::InternalError(absl::StrCat("swap-out: ", error));
  }
  if (!plan.swap_in.empty() &&
      !kernels::cpu::SwapBlocks(host_view_, device_view_, ToPairs(plan.swap_in), &error)) {
    return absl::InternalError(absl::StrCat("swap-in: ", error));
  }
  if (!plan.copies.empty() &&
      !kernels::cpu::CopyBlocks(device_view_, ToPairs(plan.copies), &error)) {
    return absl::InternalError(absl::StrCat("copy-on-write: ", error));
  }
  return absl::OkStatus();
}

kernels::PagedKvLayer CacheEngine::Layer(int32_t layer) const {
  return kernels::PagedKvLayer{device_k_[layer].data(), device_v_[layer].data(),
                               options_.num_device_blocks, options_.num_kv_heads,
                               options_.block_size, options_.head_dim, options_.dtype};
}

kernels::KvLayerView CacheEngine::LayerView(int32_t layer) {
  return device_view_.Layer(layer);
}

}  // namespace folio
