#include "kernels/cpu/reference_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace folio::kernels::cpu {

void ReferenceAttention(const float* q, const float* k, const float* v, int32_t seq_len,
                        int32_t query_len, int32_t num_heads, int32_t num_kv_heads,
                        int32_t head_dim, float scale, float* out, int32_t sliding_window) {
  const int32_t group = num_heads / num_kv_heads;
  std::vector<double> score(seq_len);
  std::vector<double> acc(head_dim);
  for (int32_t i = 0; i < query_len; ++i) {
    const int32_t pos = seq_len - query_len + i;
    const int32_t first = sliding_window > 0 ? std::max(0, pos - sliding_window + 1) : 0;
    for (int32_t h = 0; h < num_heads; ++h) {
      const int32_t kvh = h / group;
      const float* qi = q + (int64_t{i} * num_heads + h) * head_dim;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int32_t t = first; t <= pos; ++t) {
        const float* kt = k + (int64_t{t} * num_kv_heads + kvh) * head_dim;
        double dot = 0;
        for (int32_t d = 0; d < head_dim; ++d) dot += double{qi[d]} * double{kt[d]};
        score[t] = dot * scale;
        max_score = std::max(max_score, score[t]);
      }
      double total = 0;
      for (int32_t t = first; t <= pos; ++t) {
        score[t] = std::exp(score[t] - max_score);
        total += score[t];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int32_t t = first; t <= pos; ++t) {
        const float* vt = v + (int64_t{t} * num_kv_heads + kvh) * head_dim;
        for (int32_t d = 0; d < head_dim; ++d) acc[d] += score[t] * double{vt[d]};
      }
      float* o = out + (int64_t{i} * num_heads + h) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(acc[d] / total);
    }
  }
}

}  // namespace folio::kernels::cpu
