// act(x W^T + b) + r for a few rows of x: the matrix-vector products of a decoding step (one token per row).
// (The checked entry point is in linear_ops.h.)
//
// At one to a few rows a linear layer is a pass over its weights, and its time is the weights' bytes over
// the memory bandwidth plus the call's own cost. W stays in nn.Linear's layout (N, K), row-major: each output
// is the dot product of a row of x with a row of W, read once. Four rows of W x up to four rows of x accumulate
// in 16 registers (float32 sums); four rows of x more reread those W rows from L1. W is either in nn.Linear's
// layout (N, K) or blocked, each 4 rows interleaved in chunks of 16 ((N / 4, K / 16, 4, 16)): one sequential
// stream, which the hardware prefetchers follow best.
// x is widened to float32 once (a scratch of M x K floats); bfloat16 W is widened as it is loaded. The
// epilogue runs on 16 outputs at a time: bias, activation (ReLU; SiLU; GELU exact, erf by Abramowitz-Stegun
// 7.1.26, |error| < 1.5e-7; GELU tanh), then the residual; one rounding to the storage dtype at the end, or
// none when a LayerNorm follows (post-LN: LN(r + x W^T + b) from the float32 sums, row_mean_rstd below).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "simd.h"

namespace attnkit_linear {

using attnkit_simd::exp_ps;
using attnkit_simd::load16;
using attnkit_simd::store16;

constexpr int kAhead = 4;  // blocks of W rows prefetched ahead

enum Act : int64_t { kNone = 0, kRelu = 1, kSilu = 2, kGelu = 3, kGeluTanh = 4 };

// 1 / (1 + exp(-|x|)) pieces: returns sigmoid(x) without overflow (exp only of non-positive numbers).
inline __m512 sigmoid_ps(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x)));  // exp(-|x|) in (0, 1]
  const __m512 inv = _mm512_div_ps(one, _mm512_add_ps(one, e));
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(inv, neg, e, inv);  // x >= 0: 1 / (1 + e); x < 0: e / (1 + e)
}

// erf(z) by Abramowitz-Stegun 7.1.26 on |z|, sign restored.
inline __m512 erf_ps(__m512 z) {
  const __m512 a = _mm512_abs_ps(z), one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, one));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a)));
  const __m512 r = _mm512_fnmadd_ps(p, e, one);  // 1 - p e
  const __mmask16 neg = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_sub_ps(r, neg, _mm512_setzero_ps(), r);
}

inline __m512 activate(__m512 y, int64_t act) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  switch (act) {
    case kRelu:  // max returns its second operand when one is NaN: NaN stays NaN, as torch.relu
      return _mm512_max_ps(_mm512_setzero_ps(), y);
    case kSilu:
      return _mm512_mul_ps(y, sigmoid_ps(y));
    case kGelu:
      return _mm512_mul_ps(_mm512_mul_ps(half, y),
                           _mm512_add_ps(one, erf_ps(_mm512_mul_ps(y, _mm512_set1_ps(0.70710678118654752f)))));
    case kGeluTanh: {  // 0.5 y (1 + tanh(u)) = y sigmoid(2u)
      const __m512 y3 = _mm512_mul_ps(_mm512_mul_ps(y, y), y);
      const __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                     _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), y3, y));
      return _mm512_mul_ps(y, sigmoid_ps(_mm512_add_ps(u, u)));
    }
    default:
      return y;
  }
}

// acc[r][m] += W[n0 + r, :] . x[m, :] for R rows of W and MB rows of x (xf: float32 rows of K).
// W's layout: plain, rows of K (nn.Linear's), or blocked: each 4 rows interleaved in chunks of 16,
// (N / 4, K / 16, 4, 16), so that a block of 4 rows is one sequential stream. Element (r, j) of the block of
// rows starting at w: plain w[r k + j], blocked w[(j / 16) 64 + r 16 + j % 16].
template <bool Blocked>
inline int64_t at_(int r, int64_t j, int64_t k) { return Blocked ? (j / 16) * 64 + r * 16 : r * k + j; }

// acc[r][m] += W[n0 + r, :] . x[m, :] for R rows of W and MB rows of x (xf: float32 rows of K). The rows
// kAhead blocks ahead are prefetched as it goes (plain W is R streams, which the hardware prefetchers alone
// follow less well than one).
template <typename S, int R, int MB, bool Blocked>
inline void block(const S* w, const float* xf, int64_t k, float* sums, int64_t ldo) {
  constexpr int kPerLine = 64 / sizeof(S);  // elements of W per cache line
  __m512 acc[R][MB];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
  const S* ahead = w + kAhead * R * k;
  for (int64_t j = 0; j < k; j += 16) {
    if (Blocked) {  // R * 16 elements a step, one stream
      for (int l = 0; l < R * 16; l += kPerLine)
        _mm_prefetch(reinterpret_cast<const char*>(ahead + j * R + l), _MM_HINT_T0);
    } else if (j % kPerLine == 0) {
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * k + j), _MM_HINT_T0);
    }
    __m512 xv[MB];
    for (int m = 0; m < MB; ++m) xv[m] = _mm512_loadu_ps(xf + m * k + j);
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load16(w + at_<Blocked>(r, j, k));
      for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_fmadd_ps(wv, xv[m], acc[r][m]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int r = 0; r < R; ++r) sums[m * ldo + r] = _mm512_reduce_add_ps(acc[r][m]);
}

template <typename S, int R, bool Blocked>
inline void rows_of_w(const S* w, const float* xf, int64_t m_rows, int64_t k, float* sums, int64_t ldo) {
  int64_t m = 0;
  for (; m + 4 <= m_rows; m += 4) block<S, R, 4, Blocked>(w, xf + m * k, k, sums + m * ldo, ldo);
  switch (m_rows - m) {
    case 3: block<S, R, 3, Blocked>(w, xf + m * k, k, sums + m * ldo, ldo); break;
    case 2: block<S, R, 2, Blocked>(w, xf + m * k, k, sums + m * ldo, ldo); break;
    case 1: block<S, R, 1, Blocked>(w, xf + m * k, k, sums + m * ldo, ldo); break;
    default: break;
  }
}

// The epilogue of outputs [n_begin, n_end) of every row, from their float32 sums (M, n_end - n_begin):
// bias, activation, residual, one rounding to O. (Also panel_linear.h's.)
// O: S, or float (the sums stay float32 for a LayerNorm after them).
template <typename S, typename O>
inline void epilogue(const float* sums, const S* bias, const S* res, O* out, int64_t m_rows, int64_t n,
                     int64_t n_begin, int64_t n_end, int64_t act) {
  const int64_t width = n_end - n_begin;
  for (int64_t m = 0; m < m_rows; ++m)
    for (int64_t j = 0; j < width; j += 16) {
      const int64_t col = n_begin + j;
      __m512 y = _mm512_loadu_ps(sums + m * width + j);
      if (bias != nullptr) y = _mm512_add_ps(y, load16(bias + col));
      y = activate(y, act);
      if (res != nullptr) y = _mm512_add_ps(y, load16(res + m * n + col));
      store16(out + m * n + col, y);
    }
}

// Outputs [n_begin, n_end) of every row: sums (M, n_end - n_begin) float32 scratch, then the epilogue.
// n_end - n_begin is a multiple of 16 (the entry point splits N so), k a multiple of 16.
// (width is a multiple of 16, so of the 4 rows of a block.)
template <typename S, typename O, bool Blocked>
inline void small_linear_cols(const float* xf, const S* w, const S* bias, const S* res, O* out, int64_t m_rows,
                              int64_t n, int64_t k, int64_t n_begin, int64_t n_end, int64_t act, float* sums) {
  const int64_t width = n_end - n_begin;
  for (int64_t c = 0; c < width; c += 4)
    rows_of_w<S, 4, Blocked>(w + (n_begin + c) * k, xf, m_rows, k, sums + c, width);
  epilogue<S, O>(sums, bias, res, out, m_rows, n, n_begin, n_end, act);
}

// mean and 1 / sqrt(var + eps) of a float32 row of d (a multiple of 16) values, two passes (as add_norm.h).
inline void row_mean_rstd(const float* y, int64_t d, float eps, float& mean, float& rstd) {
  __m512 s = _mm512_setzero_ps();
  for (int64_t j = 0; j < d; j += 16) s = _mm512_add_ps(s, _mm512_loadu_ps(y + j));
  mean = _mm512_reduce_add_ps(s) / static_cast<float>(d);
  const __m512 m = _mm512_set1_ps(mean);
  s = _mm512_setzero_ps();
  for (int64_t j = 0; j < d; j += 16) {
    const __m512 t = _mm512_sub_ps(_mm512_loadu_ps(y + j), m);
    s = _mm512_fmadd_ps(t, t, s);
  }
  rstd = 1.0f / std::sqrt(_mm512_reduce_add_ps(s) / static_cast<float>(d) + eps);
}

// xf (M, K) = x in float32; with g and h (K,): LN(x) * g + h per row, mean and variance as row_mean_rstd.
template <typename S>
inline void widen_rows(const S* x, int64_t m, int64_t k, const S* g, const S* h, float eps, float* xf) {
  for (int64_t i = 0; i < m; ++i) {
    float* y = xf + i * k;
    for (int64_t j = 0; j < k; j += 16) _mm512_storeu_ps(y + j, load16(x + i * k + j));
    if (g == nullptr) continue;
    float mean, rstd;
    row_mean_rstd(y, k, eps, mean, rstd);
    const __m512 mv = _mm512_set1_ps(mean), rv = _mm512_set1_ps(rstd);
    for (int64_t j = 0; j < k; j += 16) {
      const __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(y + j), mv), rv);
      _mm512_storeu_ps(y + j, _mm512_fmadd_ps(t, load16(g + j), load16(h + j)));
    }
  }
}

// xb (M, K) = float32 rows xf rounded to bfloat16 (to nearest even), the panels' input.
inline void narrow_rows(const float* xf, int64_t m, int64_t k, uint16_t* xb) {
  for (int64_t j = 0; j < m * k; j += 16) store16(xb + j, _mm512_loadu_ps(xf + j));
}

}  // namespace attnkit_linear
