// Residual addition then LayerNorm, for inference (the checked entry point is in norm_ops.h):
//
//   y = x[i] + r[i];  out[i] = (y - mean(y)) / sqrt(var(y) + eps) * weight + bias   (biased variance)
//
// row by row over (N, d), float32 or bfloat16 storage, arithmetic in float32 (y is not rounded to the
// storage dtype before the statistics). d is a multiple of 16. A row's y stays in a float32 scratch of
// d floats (L1), read three times: sum, squared deviations, output; the sums run in four accumulators so
// that the additions do not wait on each other. In bfloat16 on CPUs with AVX512-BF16 (the AVX-512 variant) the output is
// rounded by vcvtneps2bf16 (to nearest even, as store16 does in integer steps elsewhere).
// Post-LN encoder layers (BERT's) end both halves with this, LN(h + f(h)): one pass over memory
// replaces an addition and a LayerNorm.
#pragma once

#include <cmath>
#include <cstdint>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_norm {

using namespace attnkit_simd;

// y = x + r (stored in y), returns {mean, 1 / sqrt(var + eps)}.
template <typename S>
inline void row_stats(const S* x, const S* r, float* y, int64_t d, float eps, float& mean, float& rstd) {
  V s[4] = {zero(), zero(), zero(), zero()};
  int64_t j = 0;
  for (; j + 64 <= d; j += 64)
    for (int u = 0; u < 4; ++u) {
      const V v = load16(x + j + 16 * u) + load16(r + j + 16 * u);
      storeu(y + j + 16 * u, v);
      s[u] = s[u] + v;
    }
  for (; j < d; j += 16) {
    const V v = load16(x + j) + load16(r + j);
    storeu(y + j, v);
    s[0] = s[0] + v;
  }
  const float inv_d = 1.0f / static_cast<float>(d);
  mean = reduce_add((s[0] + s[1]) + (s[2] + s[3])) * inv_d;
  const V m = set1(mean);
  for (int u = 0; u < 4; ++u) s[u] = zero();
  for (j = 0; j + 64 <= d; j += 64)
    for (int u = 0; u < 4; ++u) {
      const V t = loadu(y + j + 16 * u) - m;
      s[u] = fmadd(t, t, s[u]);
    }
  for (; j < d; j += 16) {
    const V t = loadu(y + j) - m;
    s[0] = fmadd(t, t, s[0]);
  }
  const float var = reduce_add((s[0] + s[1]) + (s[2] + s[3])) * inv_d;
  rstd = 1.0f / std::sqrt(var + eps);
}

// out = (y - mean) * rstd * weight + bias.
template <typename S>
inline void row_out(const float* y, const S* weight, const S* bias, S* out, int64_t d, float mean, float rstd) {
  const V m = set1(mean), k = set1(rstd);
  for (int64_t j = 0; j < d; j += 16) {
    const V t = (loadu(y + j) - m) * k;
    store16(out + j, fmadd(t, load16(weight + j), load16(bias + j)));
  }
}

#if ATTNKIT_AVX512
ATTNKIT_BF16 inline void row_out_bf16(const float* y, const uint16_t* weight, const uint16_t* bias, uint16_t* out,
                                      int64_t d, float mean, float rstd) {
  const __m512 m = _mm512_set1_ps(mean), k = _mm512_set1_ps(rstd);
  for (int64_t j = 0; j < d; j += 16) {
    const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(y + j), m), k);
    const __m512 o = _mm512_fmadd_ps(t, load16(weight + j).v, load16(bias + j).v);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j), (__m256i)_mm512_cvtneps_pbh(o));
  }
}
#endif

// Rows [begin, end) of out = LN(x + r); y is a scratch of d floats.
template <typename S>
void add_norm_rows(const S* x, const S* r, const S* weight, const S* bias, S* out, int64_t begin, int64_t end,
                   int64_t d, float eps, float* y, bool native_bf16) {
  for (int64_t i = begin; i < end; ++i) {
    float mean, rstd;
    row_stats<S>(x + i * d, r + i * d, y, d, eps, mean, rstd);
#if ATTNKIT_AVX512
    if constexpr (sizeof(S) == 2) {
      if (native_bf16) {
        row_out_bf16(y, weight, bias, out + i * d, d, mean, rstd);
        continue;
      }
    }
#endif
    row_out<S>(y, weight, bias, out + i * d, d, mean, rstd);
  }
}

}  // namespace attnkit_norm
}  // namespace ATTNKIT_VARIANT
