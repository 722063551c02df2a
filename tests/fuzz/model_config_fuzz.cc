// Fuzzes config.json parsing (ModelConfig::Parse, common/model_config.h): the
// input is the file's text. Checks: no crash or exception escapes; errors are
// INVALID_ARGUMENT naming the source; an accepted config keeps every promise
// of the header (positive sizes, num_kv_heads divides num_heads, even
// head_dim, non-negative token ids, one sliding-window flag per layer when a
// window is set) and its derived lengths are sane (MaxModelLen >= 1,
// CacheWindow and AttentionWindow within [0, sliding_window]).

#include <cstdint>

#include "common/model_config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<folio::ModelConfig> c =
      folio::ModelConfig::Parse(folio::fuzz::AsText(data, size), "config.json");
  if (!c.ok()) {
    FUZZ_CHECK(c.status().code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
               c.status().ToString().c_str());
    FUZZ_CHECK(c.status().message().find("config.json") != absl::string_view::npos,
               "error does not name the file: %s", c.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(c->hidden_size > 0 && c->intermediate_size > 0 && c->num_layers > 0 &&
                 c->num_heads > 0 && c->num_kv_heads > 0 && c->head_dim > 0 && c->vocab_size > 0,
             "a size is not positive");
  FUZZ_CHECK(c->num_heads % c->num_kv_heads == 0, "num_kv_heads %d does not divide num_heads %d",
             c->num_kv_heads, c->num_heads);
  FUZZ_CHECK(c->head_dim % 2 == 0, "odd head_dim %d", c->head_dim);
  FUZZ_CHECK(c->max_position_embeddings > 0, "max_position_embeddings %d",
             c->max_position_embeddings);
  for (folio::TokenId id : c->eos_token_ids) FUZZ_CHECK(id >= 0, "negative eos id %d", id);
  if (c->bos_token_id.has_value()) FUZZ_CHECK(*c->bos_token_id >= 0, "negative bos id");
  FUZZ_CHECK(c->MaxModelLen() >= 1, "MaxModelLen %d", c->MaxModelLen());
  if (c->sliding_window.has_value()) {
    FUZZ_CHECK(*c->sliding_window > 0, "sliding_window %d", *c->sliding_window);
    FUZZ_CHECK(c->sliding_window_layers.size() == static_cast<size_t>(c->num_layers),
               "%zu sliding-window flags for %d layers", c->sliding_window_layers.size(),
               c->num_layers);
    // Layers are bounded by what a 2 GiB RSS allows; walk at most a few.
    for (int32_t layer = 0; layer < c->num_layers && layer < 1024; ++layer) {
      const int32_t w = c->AttentionWindow(layer);
      FUZZ_CHECK(w == 0 || w == *c->sliding_window, "layer %d window %d", layer, w);
    }
  }
  if (c->num_layers <= 1024) {
    const int32_t w = c->CacheWindow();
    FUZZ_CHECK(w >= 0 && (w == 0 || (c->sliding_window.has_value() && w == *c->sliding_window)),
               "CacheWindow %d", w);
  }
  if (c->rope_scaling.has_value()) {
    FUZZ_CHECK(c->rope_scaling->factor > 0, "rope factor %g", c->rope_scaling->factor);
  }
  return 0;
}
