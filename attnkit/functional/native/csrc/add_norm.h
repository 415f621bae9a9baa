// Residual addition then LayerNorm, for inference (the checked entry point is in norm_ops.h):
//
//   y = x[i] + r[i];  out[i] = (y - mean(y)) / sqrt(var(y) + eps) * weight + bias   (biased variance)
//
// row by row over (N, d), float32 or bfloat16 storage, arithmetic in float32 (y is not rounded to the
// storage dtype before the statistics). d is a multiple of 16. A row's y stays in a float32 scratch of
// d floats (L1), read three times: sum, squared deviations, output; the sums run in four accumulators so
// that the additions do not wait on each other. In bfloat16 on CPUs with AVX512-BF16 the output is
// rounded by vcvtneps2bf16 (to nearest even, as store16 does in integer steps elsewhere).
// Post-LN encoder layers (BERT's) end both halves with this, LN(h + f(h)): one pass over memory
// replaces an addition and a LayerNorm.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "simd.h"

namespace attnkit_norm {

using attnkit_simd::load16;
using attnkit_simd::store16;

// y = x + r (stored in y), returns {mean, 1 / sqrt(var + eps)}.
template <typename S>
inline void row_stats(const S* x, const S* r, float* y, int64_t d, float eps, float& mean, float& rstd) {
  __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t j = 0;
  for (; j + 64 <= d; j += 64)
    for (int u = 0; u < 4; ++u) {
      const __m512 v = _mm512_add_ps(load16(x + j + 16 * u), load16(r + j + 16 * u));
      _mm512_storeu_ps(y + j + 16 * u, v);
      s[u] = _mm512_add_ps(s[u], v);
    }
  for (; j < d; j += 16) {
    const __m512 v = _mm512_add_ps(load16(x + j), load16(r + j));
    _mm512_storeu_ps(y + j, v);
    s[0] = _mm512_add_ps(s[0], v);
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  mean = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3]))) * inv_d;
  const __m512 m = _mm512_set1_ps(mean);
  for (int u = 0; u < 4; ++u) s[u] = _mm512_setzero_ps();
  for (j = 0; j + 64 <= d; j += 64)
    for (int u = 0; u < 4; ++u) {
      const __m512 t = _mm512_sub_ps(_mm512_loadu_ps(y + j + 16 * u), m);
      s[u] = _mm512_fmadd_ps(t, t, s[u]);
    }
  for (; j < d; j += 16) {
    const __m512 t = _mm512_sub_ps(_mm512_loadu_ps(y + j), m);
    s[0] = _mm512_fmadd_ps(t, t, s[0]);
  }
  const float var = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3]))) * inv_d;
  rstd = 1.0f / std::sqrt(var + eps);
}

// out = (y - mean) * rstd * weight + bias.
template <typename S>
inline void row_out(const float* y, const S* weight, const S* bias, S* out, int64_t d, float mean, float rstd) {
  const __m512 m = _mm512_set1_ps(mean), k = _mm512_set1_ps(rstd);
  for (int64_t j = 0; j < d; j += 16) {
    const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(y + j), m), k);
    store16(out + j, _mm512_fmadd_ps(t, load16(weight + j), load16(bias + j)));
  }
}

ATTNKIT_BF16 inline void row_out_bf16(const float* y, const uint16_t* weight, const uint16_t* bias, uint16_t* out,
                                      int64_t d, float mean, float rstd) {
  const __m512 m = _mm512_set1_ps(mean), k = _mm512_set1_ps(rstd);
  for (int64_t j = 0; j < d; j += 16) {
    const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(y + j), m), k);
    const __m512 o = _mm512_fmadd_ps(t, load16(weight + j), load16(bias + j));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), (__m256i)_mm512_cvtneps_pbh(o));
  }
}

// Rows [begin, end) of out = LN(x + r); y is a scratch of d floats.
template <typename S>
void add_norm_rows(const S* x, const S* r, const S* weight, const S* bias, S* out, int64_t begin, int64_t end,
                   int64_t d, float eps, float* y, bool native_bf16) {
  for (int64_t i = begin; i < end; ++i) {
    float mean, rstd;
    row_stats<S>(x + i * d, r + i * d, y, d, eps, mean, rstd);
    if constexpr (sizeof(S) == 2) {
      if (native_bf16) {
        row_out_bf16(y, weight, bias, out + i * d, d, mean, rstd);
        continue;
      }
    }
    row_out<S>(y, weight, bias, out + i * d, d, mean, rstd);
  }
}

}  // namespace attnkit_norm
