#include "tests/gpu/demo_model_loader.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace folio::gpu_test {
namespace {

using json = nlohmann::json;

bool ReadFile(const std::string& path, std::string* out, std::string* error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return true;
}

float Bf16ToFloat(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      u = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

class Safetensors {
 public:
  bool Open(const std::string& path, std::string* error) {
    if (!ReadFile(path, &bytes_, error)) return false;
    if (bytes_.size() < 8) return Fail(error, path + ": too short");
    uint64_t n = 0;
    std::memcpy(&n, bytes_.data(), 8);
    if (n > bytes_.size() - 8) return Fail(error, path + ": bad header length");
    try {
      header_ = json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + std::ptrdiff_t(n));
    } catch (const std::exception& e) {
      return Fail(error, path + ": header: " + e.what());
    }
    data_ = 8 + n;
    path_ = path;
    return true;
  }

  bool Has(const std::string& name) const { return header_.contains(name); }

  // The tensor converted to fp32, appended to *out; its shape must be `shape`.
  bool Read(const std::string& name, const std::vector<int64_t>& shape, std::vector<float>* out,
            std::string* error) const {
    if (!header_.contains(name)) return Fail(error, path_ + ": no tensor " + name);
    try {
      const json& t = header_.at(name);
      const std::vector<int64_t> got = t.at("shape").get<std::vector<int64_t>>();
      if (got != shape) return Fail(error, name + ": unexpected shape");
      const std::string dtype = t.at("dtype").get<std::string>();
      const auto offsets = t.at("data_offsets").get<std::vector<uint64_t>>();
      int64_t count = 1;
      for (int64_t s : shape) count *= s;
      const size_t elem = dtype == "F32" ? 4 : (dtype == "BF16" || dtype == "F16") ? 2 : 0;
      if (elem == 0) return Fail(error, name + ": unsupported dtype " + dtype);
      if (offsets.size() != 2 || offsets[1] - offsets[0] != uint64_t(count) * elem ||
          data_ + offsets[1] > bytes_.size()) {
        return Fail(error, name + ": bad data_offsets");
      }
      const char* p = bytes_.data() + data_ + offsets[0];
      const size_t at = out->size();
      out->resize(at + size_t(count));
      for (int64_t i = 0; i < count; ++i) {
        if (elem == 4) {
          std::memcpy(&(*out)[at + i], p + 4 * i, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          (*out)[at + i] = dtype == "BF16" ? Bf16ToFloat(h) : F16ToFloat(h);
        }
      }
    } catch (const std::exception& e) {
      return Fail(error, name + ": " + e.what());
    }
    return true;
  }

 private:
  static bool Fail(std::string* error, const std::string& why) {
    *error = why;
    return false;
  }

  std::string path_;
  std::string bytes_;
  json header_;
  size_t data_ = 0;
};

// DemoConfig::layer_windows (after num_layers). Throws on a bad type.
void ParseWindows(const json& j, DemoConfig* c) {
  c->layer_windows.assign(c->num_layers, 0);
  // The architecture: architectures[0] first, else model_type.
  auto given = [&](const char* key) { return j.contains(key) && !j.at(key).is_null(); };
  std::string arch = given("architectures") ? j.at("architectures").at(0).get<std::string>() : "";
  const std::string type = given("model_type") ? j.at("model_type").get<std::string>() : "";
  const bool mistral = arch == "MistralForCausalLM" || (arch.empty() && type == "mistral");
  const bool qwen2 = arch == "Qwen2ForCausalLM" || (arch.empty() && type == "qwen2");
  const bool qwen2_windowed =
      qwen2 && given("use_sliding_window") && j.at("use_sliding_window").get<bool>();
  if (!mistral && !qwen2_windowed) return;
  if (j.contains("sliding_window") && j.at("sliding_window").is_null()) return;
  const int32_t window = j.value("sliding_window", 4096);
  for (int32_t layer = 0; layer < c->num_layers; ++layer) {
    bool windowed = true;
    if (qwen2 && given("layer_types")) {
      windowed = j.at("layer_types").at(layer).get<std::string>() == "sliding_attention";
    } else if (qwen2) {
      windowed = layer >= (given("max_window_layers") ? j.at("max_window_layers").get<int>() : 28);
    }
    if (windowed) c->layer_windows[layer] = window;
  }
}

bool ParseConfig(const std::string& text, DemoConfig* c, std::string* error) {
  try {
    const json j = json::parse(text);
    c->hidden = j.at("hidden_size").get<int32_t>();
    c->intermediate = j.at("intermediate_size").get<int32_t>();
    c->num_layers = j.at("num_hidden_layers").get<int32_t>();
    c->num_heads = j.at("num_attention_heads").get<int32_t>();
    c->num_kv_heads = j.value("num_key_value_heads", c->num_heads);
    c->head_dim = j.contains("head_dim") && !j.at("head_dim").is_null()
                      ? j.at("head_dim").get<int32_t>()
                      : c->hidden / c->num_heads;
    c->vocab_size = j.at("vocab_size").get<int32_t>();
    c->max_position = j.at("max_position_embeddings").get<int32_t>();
    c->rms_eps = j.value("rms_norm_eps", 1e-6f);
    c->rope_theta = j.value("rope_theta", 10000.0f);
    c->tied_embeddings = j.value("tie_word_embeddings", false);
    c->qkv_bias = j.value("model_type", std::string()) == "qwen2" || j.value("attention_bias", false);
    if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null()) {
      const json& rs = j.at("rope_scaling");
      const std::string type = rs.contains("rope_type") ? rs.at("rope_type").get<std::string>()
                                                        : rs.value("type", std::string());
      if (type != "llama3") {
        *error = "config.json: rope_scaling type '" + type + "' is not supported";
        return false;
      }
      kernels::cpu::RopeScalingParams s;
      s.factor = rs.value("factor", s.factor);
      s.low_freq_factor = rs.value("low_freq_factor", s.low_freq_factor);
      s.high_freq_factor = rs.value("high_freq_factor", s.high_freq_factor);
      s.original_max_position_embeddings =
          rs.value("original_max_position_embeddings", s.original_max_position_embeddings);
      c->rope_scaling = s;
    }
    ParseWindows(j, c);
  } catch (const std::exception& e) {
    *error = std::string("config.json: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace

bool LoadDemoModel(const std::string& dir, DemoModel* m, std::string* error) {
  std::string text;
  if (!ReadFile(dir + "/config.json", &text, error)) return false;
  if (!ParseConfig(text, &m->config, error)) return false;
  Safetensors st;
  if (!st.Open(dir + "/model.safetensors", error)) return false;
  const DemoConfig& c = m->config;
  const int64_t d = c.hidden, hd = c.head_dim, inter = c.intermediate;
  if (!st.Read("model.embed_tokens.weight", {c.vocab_size, d}, &m->embed, error)) return false;
  if (!st.Read("model.norm.weight", {d}, &m->final_norm, error)) return false;
  if (!c.tied_embeddings &&
      !st.Read("lm_head.weight", {c.vocab_size, d}, &m->lm_head, error)) {
    return false;
  }
  m->layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    DemoLayer& L = m->layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const int64_t qr = c.num_heads * hd, kvr = c.num_kv_heads * hd;
    bool ok = st.Read(p + "input_layernorm.weight", {d}, &L.input_norm, error) &&
              st.Read(p + "self_attn.q_proj.weight", {qr, d}, &L.qkv, error) &&
              st.Read(p + "self_attn.k_proj.weight", {kvr, d}, &L.qkv, error) &&
              st.Read(p + "self_attn.v_proj.weight", {kvr, d}, &L.qkv, error) &&
              st.Read(p + "self_attn.o_proj.weight", {d, qr}, &L.o_proj, error) &&
              st.Read(p + "post_attention_layernorm.weight", {d}, &L.post_attention_norm, error) &&
              st.Read(p + "mlp.gate_proj.weight", {inter, d}, &L.gate_up, error) &&
              st.Read(p + "mlp.up_proj.weight", {inter, d}, &L.gate_up, error) &&
              st.Read(p + "mlp.down_proj.weight", {d, inter}, &L.down_proj, error);
    if (ok && c.qkv_bias) {
      ok = st.Read(p + "self_attn.q_proj.bias", {qr}, &L.qkv_bias, error) &&
           st.Read(p + "self_attn.k_proj.bias", {kvr}, &L.qkv_bias, error) &&
           st.Read(p + "self_attn.v_proj.bias", {kvr}, &L.qkv_bias, error);
    }
    if (!ok) return false;
  }
  return true;
}

gpu::HostModel DemoModel::View() const {
  const DemoConfig& c = config;
  gpu::HostModel h;
  h.hidden = c.hidden;
  h.intermediate = c.intermediate;
  h.num_heads = c.num_heads;
  h.num_kv_heads = c.num_kv_heads;
  h.head_dim = c.head_dim;
  h.vocab_size = c.vocab_size;
  h.vocab_begin = 0;
  h.vocab_count = c.vocab_size;
  h.vocab_padded = c.vocab_size;
  h.rms_eps = c.rms_eps;
  h.rope_theta = c.rope_theta;
  h.rope_scaling = c.rope_scaling;
  h.max_position = c.max_position;
  h.qkv_bias = c.qkv_bias;
  h.tied_embeddings = c.tied_embeddings;
  h.embed = embed;
  h.final_norm = final_norm;
  h.lm_head = lm_head;
  for (size_t i = 0; i < layers.size(); ++i) {
    const DemoLayer& L = layers[i];
    h.layers.push_back(gpu::HostLayer{L.input_norm, L.qkv, L.qkv_bias, L.o_proj,
                                      L.post_attention_norm, L.gate_up, L.down_proj,
                                      c.layer_windows.empty() ? 0 : c.layer_windows[i]});
  }
  return h;
}

}  // namespace folio::gpu_test
