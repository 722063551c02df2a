// A small std-only loader of a single-rank Llama-family model directory
// (config.json + model.safetensors) into fp32 host tensors laid out like
// worker/model_weights.h, for the GPU checks in kernels-only builds (which
// lack abseil and so cannot use ModelWeights). Fused tensors are built by
// concatenation: qkv = [q; k; v] rows, gate_up = [gate; up] rows.
// Weights may be stored as BF16, F16 or F32. Sliding windows as in
// common/model_config.h. One safetensors file only (no
// sharded index); no tensor parallelism.
//
// Thread-compatible.
#ifndef FOLIO_TESTS_GPU_DEMO_MODEL_LOADER_H_
#define FOLIO_TESTS_GPU_DEMO_MODEL_LOADER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/rope.h"
#include "worker/cuda/host_model.h"

namespace folio::gpu_test {

struct DemoConfig {
  int32_t hidden = 0, intermediate = 0, num_layers = 0, num_heads = 0, num_kv_heads = 0;
  int32_t head_dim = 0, vocab_size = 0, max_position = 0;
  float rms_eps = 1e-5f, rope_theta = 10000.0f;
  std::optional<kernels::cpu::RopeScalingParams> rope_scaling;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  // Each layer's attention window (0: none), by transformers' rules as in
  // common/model_config.cc: Mistral's `sliding_window` on every layer;
  // Qwen2's only with `use_sliding_window`, on the layers `layer_types`
  // marks or else those from `max_window_layers` (default 28) on. A missing
  // `sliding_window` means 4096, null none.
  std::vector<int32_t> layer_windows;
};

struct DemoLayer {
  std::vector<float> input_norm, qkv, qkv_bias, o_proj, post_attention_norm, gate_up, down_proj;
};

struct DemoModel {
  DemoConfig config;
  std::vector<float> embed, final_norm, lm_head;  // lm_head empty when tied
  std::vector<DemoLayer> layers;

  // A view for CudaModelRunner::Create; valid while *this lives unchanged.
  gpu::HostModel View() const;
};

// Reads `dir`/config.json and `dir`/model.safetensors. False with a reason
// in *error on any problem (missing file or tensor, wrong shape, dtype).
bool LoadDemoModel(const std::string& dir, DemoModel* out, std::string* error);

}  // namespace folio::gpu_test

#endif  // FOLIO_TESTS_GPU_DEMO_MODEL_LOADER_H_
