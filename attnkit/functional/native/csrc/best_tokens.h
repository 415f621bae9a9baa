// The best allowed token of each row of logits and its log-probability, in one pass over the row plus
// one of exps: what log_softmax, index_fill(suppressed, -inf) and max compute in three (a NAT pass asks
// it of every position: 15 rows x 8,000 words). Included once by module.cpp (and by
// the inference layer's compositions.cpp).
//
//   logp[i] = x[i, t] - log(sum_j exp(x[i, j])),  t = the first j outside `suppressed` with the largest x[i, j]
//
// The softmax runs over every token, suppressed ones included (as log_softmax before index_fill).
// A row this does not decide, one with a NaN or +inf, all -inf, or no allowed token, gets id -1 and
// logp NaN: the caller takes the reference path for it (functional.tokens.best_tokens).
// Logits float32 or bfloat16 (widened as they are loaded); log-probabilities float32.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>

#include "simd.h"

namespace attnkit_tokens {

inline __mmask16 first(int64_t n) { return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1); }

// The lanes of k from p, fill elsewhere (masked-off elements are not read).
inline __m512 load(const float* p, __mmask16 k, __m512 fill) { return _mm512_mask_loadu_ps(fill, k, p); }
inline __m512 load(const uint16_t* p, __mmask16 k, __m512 fill) {
  const __m256i h = _mm256_maskz_loadu_epi16(k, p);
  return _mm512_mask_mov_ps(fill, k, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
}

// One row of v logits; bad: sorted suppressed ids. Returns the id (-1: undecided) and writes logp.
template <typename S>
inline int64_t best_row(const S* x, int64_t v, const int64_t* bad, int64_t nbad, float& logp) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 pinf = _mm512_set1_ps(std::numeric_limits<float>::infinity());
  // pass 1: the row's max; NaN or +inf anywhere leaves the row undecided
  __m512 mx = ninf;
  __mmask16 odd = 0;
  for (int64_t j = 0; j < v; j += 16) {
    const __m512 y = load(x + j, first(v - j), ninf);
    odd |= _mm512_cmp_ps_mask(y, y, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(y, pinf, _CMP_EQ_OQ);
    mx = _mm512_max_ps(mx, y);
  }
  logp = std::numeric_limits<float>::quiet_NaN();
  const float m = _mm512_reduce_max_ps(mx);
  if (odd || m == -std::numeric_limits<float>::infinity()) return -1;
  // the best allowed: the stretches between suppressed ids, each lane keeping its first largest
  __m512 best = ninf;
  __m512i at = _mm512_set1_epi32(-1);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t a = 0;
  for (int64_t s = 0; s <= nbad; ++s) {
    const int64_t b = s < nbad ? bad[s] : v;  // allowed: [a, b)
    for (int64_t j = a; j < b; j += 16) {
      const __mmask16 k = first(b - j);
      const __m512 y = load(x + j, k, ninf);
      const __mmask16 gt = _mm512_mask_cmp_ps_mask(k, y, best, _CMP_GT_OQ);
      best = _mm512_mask_mov_ps(best, gt, y);
      at = _mm512_mask_mov_epi32(at, gt, _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(j))));
    }
    a = b + 1;
  }
  const float top = _mm512_reduce_max_ps(best);
  const __mmask16 tops = _mm512_mask_cmp_epi32_mask(_mm512_cmp_ps_mask(best, _mm512_set1_ps(top), _CMP_EQ_OQ), at,
                                                    _mm512_set1_epi32(-1), _MM_CMPINT_NE);
  if (top == -std::numeric_limits<float>::infinity() || tops == 0) return -1;  // nothing allowed (or all -inf)
  const int32_t id = _mm512_mask_reduce_min_epi32(tops, at);
  // pass 2: sum of exp(x - max) over every token
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < v; j += 16) {
    const __m512 y = load(x + j, first(v - j), ninf);
    sum = _mm512_add_ps(sum, attnkit_simd::exp_ps(_mm512_sub_ps(y, mv)));
  }
  logp = top - m - std::log(_mm512_reduce_add_ps(sum));
  return id;
}

}  // namespace attnkit_tokens

namespace attnkit_ops {

// logits (M, V) float32 or bfloat16, contiguous; suppressed (n,) int64, strictly increasing, in [0, V)
// -> logp (M,) float32, ids (M,).
inline std::tuple<at::Tensor, at::Tensor> best_tokens(const at::Tensor& logits, const at::Tensor& suppressed) {
  const char* who = "best_tokens";
  TORCH_CHECK(logits.defined() && logits.device().is_cpu() &&
                  (logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kBFloat16) &&
                  logits.dim() == 2 && logits.is_contiguous(),
              who, ": `logits` must be a contiguous (M, V) float32 or bfloat16 CPU tensor");
  TORCH_CHECK(suppressed.defined() && suppressed.device().is_cpu() && suppressed.scalar_type() == at::kLong &&
                  suppressed.dim() == 1 && suppressed.is_contiguous(),
              who, ": `suppressed` must be a contiguous (n,) int64 CPU tensor");
  const int64_t m = logits.size(0), v = logits.size(1), nbad = suppressed.numel();
  TORCH_CHECK(v < (int64_t{1} << 31) - 16, who, ": V=", v, " is too large");
  const int64_t* bad = suppressed.data_ptr<int64_t>();
  for (int64_t s = 0; s < nbad; ++s)
    TORCH_CHECK(bad[s] >= 0 && bad[s] < v && (s == 0 || bad[s] > bad[s - 1]), who,
                ": `suppressed` must be strictly increasing ids in [0, ", v, ")");
  auto logp = at::empty({m}, logits.options().dtype(at::kFloat));
  auto ids = at::empty({m}, logits.options().dtype(at::kLong));
  if (m == 0) return {logp, ids};
  float* lp = logp.data_ptr<float>();
  int64_t* ip = ids.data_ptr<int64_t>();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(v, 1));
  auto go = [&](const auto* x) {
    at::parallel_for(0, m, grain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) ip[i] = attnkit_tokens::best_row(x + i * v, v, bad, nbad, lp[i]);
    });
  };
  if (logits.scalar_type() == at::kFloat)
    go(logits.data_ptr<float>());
  else
    go(reinterpret_cast<const uint16_t*>(logits.data_ptr()));
  return {logp, ids};
}

}  // namespace attnkit_ops
