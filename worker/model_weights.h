#ifndef FOLIO_WORKER_MODEL_WEIGHTS_H_
#define FOLIO_WORKER_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model_config.h"

namespace folio {

// Which slice of the model a rank holds (Megatron-style tensor parallelism):
// q/k/v and gate/up split by output rows, o and down by input columns; KV
// heads divided among ranks, replicated when there are fewer than ranks;
// embedding and LM head split by vocabulary rows.
struct ShardSpec {
  int32_t rank = 0;
  int32_t world_size = 1;
};

// Per-rank head counts and sizes derived from the config and the shard.
struct ShardShape {
  int32_t num_heads = 0;     // query heads on this rank
  int32_t num_kv_heads = 0;  // KV heads on this rank
  int32_t first_head = 0;    // global index of this rank's first query head
  int32_t first_kv_head = 0;
  int32_t intermediate = 0;  // MLP width on this rank
  int32_t first_intermediate = 0;
  // Vocabulary-parallel embedding and LM head: this rank holds rows
  // [vocab_begin, vocab_begin + vocab_count); counts differ by at most one
  // across ranks (the first vocab % world_size ranks hold one more), and
  // vocab_padded is the largest count (the logits gather's chunk per rank).
  int32_t vocab_begin = 0;
  int32_t vocab_count = 0;
  int32_t vocab_padded = 0;

  static absl::StatusOr<ShardShape> Make(const ModelConfig& config, const ShardSpec& shard);
};

struct LayerWeights {
  std::vector<float> input_norm;          // [hidden]
  std::vector<float> qkv;                 // [(heads + 2 * kv_heads) * head_dim][hidden]
  std::vector<float> qkv_bias;            // same rows, or empty
  std::vector<float> o_proj;              // [hidden][heads * head_dim]
  std::vector<float> post_attention_norm; // [hidden]
  std::vector<float> gate_up;             // [2 * intermediate][hidden]: gate rows, then up rows
  std::vector<float> down_proj;           // [hidden][intermediate]
};

// A Llama-family model's weights for one rank, converted to fp32 (the CPU
// compute type). Only this rank's slices are read from the memory-mapped
// safetensors.
struct ModelWeights {
  ModelConfig config;
  ShardSpec shard;
  ShardShape shape;
  std::vector<float> embed;       // [shape.vocab_count][hidden]: this rank's vocab rows
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [shape.vocab_count][hidden]; empty when tied to embed

  const float* lm_head_data() const { return lm_head.empty() ? embed.data() : lm_head.data(); }

  static absl::StatusOr<std::unique_ptr<ModelWeights>> Load(const std::string& model_dir,
                                                            const ShardSpec& shard);
};

}  // namespace folio

#endif  // FOLIO_WORKER_MODEL_WEIGHTS_H_
