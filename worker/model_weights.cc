#include "worker/model_weights.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/weight_loader.h"

namespace folio {

absl::StatusOr<ShardShape> ShardShape::Make(const ModelConfig& c, const ShardSpec& s) {
  if (s.world_size < 1 || s.rank < 0 || s.rank >= s.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank must be in [0, world_size), got rank ", s.rank, " of ", s.world_size));
  }
  if (c.num_heads % s.world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_attention_heads ", c.num_heads,
                                                   " is not divisible by the tensor-parallel size ",
                                                   s.world_size));
  }
  if (c.intermediate_size % s.world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("intermediate_size ", c.intermediate_size,
                                                   " is not divisible by the tensor-parallel size ",
                                                   s.world_size));
  }
  ShardShape out;
  out.num_heads = c.num_heads / s.world_size;
  out.first_head = s.rank * out.num_heads;
  if (c.num_kv_heads >= s.world_size) {
    if (c.num_kv_heads % s.world_size != 0) {
      return absl::InvalidArgumentError(absl::StrCat("num_key_value_heads ", c.num_kv_heads,
                                                     " is not divisible by the tensor-parallel size ",
                                                     s.world_size));
    }
    out.num_kv_heads = c.num_kv_heads / s.world_size;
    out.first_kv_head = s.rank * out.num_kv_heads;
  } else {
    // Fewer KV heads than ranks: each rank keeps the one its query heads use.
    if (s.world_size % c.num_kv_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor-parallel size ", s.world_size,
                                                     " is not a multiple of num_key_value_heads ",
                                                     c.num_kv_heads));
    }
    out.num_kv_heads = 1;
    out.first_kv_head = s.rank / (s.world_size / c.num_kv_heads);
  }
  out.intermediate = c.intermediate_size / s.world_size;
  out.first_intermediate = s.rank * out.intermediate;
  if (c.vocab_size < s.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size ", c.vocab_size,
                                                   " is smaller than the tensor-parallel size ",
                                                   s.world_size));
  }
  const int32_t base = c.vocab_size / s.world_size, extra = c.vocab_size % s.world_size;
  out.vocab_count = base + (s.rank < extra ? 1 : 0);
  out.vocab_begin = s.rank * base + std::min(s.rank, extra);
  out.vocab_padded = base + (extra > 0 ? 1 : 0);
  return out;
}

namespace {

class Reader {
 public:
  explicit Reader(const WeightLoader& w) : w_(w) {}

  absl::Status Full(const std::string& name, std::vector<int64_t> shape, std::vector<float>& out) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    out.resize(n);
    return w_.ReadF32(name, shape, out.data());
  }
  // Appends rows [begin, begin + count) of a 2-D tensor (or a 1-D bias).
  absl::Status Rows(const std::string& name, std::vector<int64_t> shape, int64_t begin,
                    int64_t count, std::vector<float>& out) {
    const int64_t row = shape.size() == 2 ? shape[1] : 1;
    const size_t at = out.size();
    out.resize(at + count * row);
    return w_.ReadRowsF32(name, shape, begin, count, out.data() + at);
  }
  absl::Status Cols(const std::string& name, std::vector<int64_t> shape, int64_t begin,
                    int64_t count, std::vector<float>& out) {
    out.resize(shape[0] * count);
    return w_.ReadColsF32(name, shape, begin, count, out.data());
  }

 private:
  const WeightLoader& w_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelWeights>> ModelWeights::Load(const std::string& model_dir,
                                                                 const ShardSpec& shard) {
  absl::StatusOr<ModelConfig> config = ModelConfig::LoadFromDirectory(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<ShardShape> shape = ShardShape::Make(*config, shard);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<std::unique_ptr<WeightLoader>> loader = WeightLoader::Open(model_dir);
  if (!loader.ok()) return loader.status();

  auto m = std::make_unique<ModelWeights>();
  m->config = *config;
  m->shard = shard;
  m->shape = *shape;
  const ModelConfig& c = m->config;
  const ShardShape& s = m->shape;
  const int64_t d = c.hidden_size, hd = c.head_dim, vocab = c.vocab_size;
  const int64_t q_rows = int64_t{c.num_heads} * hd, kv_rows = int64_t{c.num_kv_heads} * hd;
  Reader r(**loader);

  if (absl::Status st = r.Rows("model.embed_tokens.weight", {vocab, d}, s.vocab_begin,
                               s.vocab_count, m->embed);
      !st.ok()) {
    return st;
  }
  if (absl::Status st = r.Full("model.norm.weight", {d}, m->final_norm); !st.ok()) return st;
  if (!c.tie_word_embeddings) {
    if (absl::Status st = r.Rows("lm_head.weight", {vocab, d}, s.vocab_begin, s.vocab_count,
                                 m->lm_head);
        !st.ok()) {
      return st;
    }
  }
  m->layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    LayerWeights& L = m->layers[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    const int64_t q_begin = int64_t{s.first_head} * hd, q_count = int64_t{s.num_heads} * hd;
    const int64_t kv_begin = int64_t{s.first_kv_head} * hd, kv_count = int64_t{s.num_kv_heads} * hd;
    absl::Status st = r.Full(p + "input_layernorm.weight", {d}, L.input_norm);
    if (st.ok()) st = r.Rows(p + "self_attn.q_proj.weight", {q_rows, d}, q_begin, q_count, L.qkv);
    if (st.ok()) st = r.Rows(p + "self_attn.k_proj.weight", {kv_rows, d}, kv_begin, kv_count, L.qkv);
    if (st.ok()) st = r.Rows(p + "self_attn.v_proj.weight", {kv_rows, d}, kv_begin, kv_count, L.qkv);
    if (st.ok() && c.qkv_bias) {
      st = r.Rows(p + "self_attn.q_proj.bias", {q_rows}, q_begin, q_count, L.qkv_bias);
      if (st.ok()) st = r.Rows(p + "self_attn.k_proj.bias", {kv_rows}, kv_begin, kv_count, L.qkv_bias);
      if (st.ok()) st = r.Rows(p + "self_attn.v_proj.bias", {kv_rows}, kv_begin, kv_count, L.qkv_bias);
    }
    if (st.ok()) st = r.Cols(p + "self_attn.o_proj.weight", {d, q_rows}, q_begin, q_count, L.o_proj);
    if (st.ok()) st = r.Full(p + "post_attention_layernorm.weight", {d}, L.post_attention_norm);
    const int64_t inter = c.intermediate_size;
    if (st.ok()) {
      st = r.Rows(p + "mlp.gate_proj.weight", {inter, d}, s.first_intermediate, s.intermediate, L.gate_up);
    }
    if (st.ok()) {
      st = r.Rows(p + "mlp.up_proj.weight", {inter, d}, s.first_intermediate, s.intermediate, L.gate_up);
    }
    if (st.ok()) {
      st = r.Cols(p + "mlp.down_proj.weight", {d, inter}, s.first_intermediate, s.intermediate, L.down_proj);
    }
    if (!st.ok()) return st;
  }
  return m;
}

}  // namespace folio
