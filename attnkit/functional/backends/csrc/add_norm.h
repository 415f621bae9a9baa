// Included by window_attention.cpp only (one extension). Residual addition then LayerNorm, for inference:
//
//   y = x[i] + r[i];  out[i] = (y - mean(y)) / sqrt(var(y) + eps) * weight + bias   (biased variance)
//
// row by row over (N, d), float32 or bfloat16 storage, arithmetic in float32 (y is not rounded to the
// storage dtype before the statistics). d is a multiple of 16. A row's y stays in a float32 scratch of
// d floats (L1), read three times: sum, squared deviations, output. Post-LN encoder layers (BERT's) end
// both halves with this, LN(h + f(h)); one pass over memory replaces an addition and a LayerNorm.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "window_tiles.h"

namespace attnkit_norm {

using attnkit_window::load16;
using attnkit_window::store16;

template <typename S>
void add_norm_rows(const S* x, const S* r, const S* weight, const S* bias, S* out, int64_t begin, int64_t end,
                   int64_t d, float eps, float* y) {
  const float inv_d = 1.0f / static_cast<float>(d);
  for (int64_t i = begin; i < end; ++i) {
    const S* xi = x + i * d;
    const S* ri = r + i * d;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < d; j += 16) {
      const __m512 v = _mm512_add_ps(load16(xi + j), load16(ri + j));
      _mm512_storeu_ps(y + j, v);
      sum = _mm512_add_ps(sum, v);
    }
    const __m512 mean = _mm512_set1_ps(_mm512_reduce_add_ps(sum) * inv_d);
    __m512 sq = _mm512_setzero_ps();
    for (int64_t j = 0; j < d; j += 16) {
      const __m512 t = _mm512_sub_ps(_mm512_loadu_ps(y + j), mean);
      sq = _mm512_fmadd_ps(t, t, sq);
    }
    const __m512 rstd = _mm512_set1_ps(1.0f / std::sqrt(_mm512_reduce_add_ps(sq) * inv_d + eps));
    S* oi = out + i * d;
    for (int64_t j = 0; j < d; j += 16) {
      const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(y + j), mean), rstd);
      store16(oi + j, _mm512_fmadd_ps(t, load16(weight + j), load16(bias + j)));
    }
  }
}

}  // namespace attnkit_norm
