// act(x W^T + b) + r for a few rows of x: the matrix-vector products of a decoding step (one token per row).
// (The checked entry point is in linear_ops.h.)
//
// At one to a few rows a linear layer is a pass over its weights, and its time is the weights' bytes over
// the memory bandwidth plus the call's own cost. W stays in nn.Linear's layout (N, K), row-major: each output
// is the dot product of a row of x with a row of W, read once. Four rows of W x up to four rows of x accumulate
// in 16 registers (float32 sums; on variants with fewer registers, 4 x 1); four rows of x more reread those W rows from L1. W is either in nn.Linear's
// layout (N, K) or blocked, each 4 rows interleaved in chunks of 16 ((N / 4, K / 16, 4, 16)): one sequential
// stream, which the hardware prefetchers follow best.
// x is widened to float32 once (a scratch of M x K floats); bfloat16 W is widened as it is loaded. The
// epilogue runs on 16 outputs at a time: bias, activation (ReLU; SiLU; GELU exact, erf by Abramowitz-Stegun
// 7.1.26, |error| < 1.5e-7; GELU tanh), then the residual; one rounding to the storage dtype at the end, or
// none when a LayerNorm follows (post-LN: LN(r + x W^T + b) from the float32 sums, row_mean_rstd below).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_linear {

using namespace attnkit_simd;

constexpr int kAhead = 4;  // blocks of W rows prefetched ahead
// Rows of x per register tile: 4 rows of W x 4 rows of x = 16 accumulators on AVX-512; 4 x 1 where
// registers hold 8 V (AVX2, NEON), where 4 x 4 would spill.
constexpr int kXRows = kWide ? 4 : 1;

enum Act : int64_t { kNone = 0, kRelu = 1, kSilu = 2, kGelu = 3, kGeluTanh = 4 };

// 1 / (1 + exp(-|x|)) pieces: returns sigmoid(x) without overflow (exp only of non-positive numbers).
inline V sigmoid_ps(V x) {
  const V one = set1(1.0f);
  const V e = exp_ps(zero() - abs(x));  // exp(-|x|) in (0, 1]
  const V inv = one / (one + e);
  return select(lt(x, zero()), e * inv, inv);  // x >= 0: 1 / (1 + e); x < 0: e / (1 + e)
}

// erf(z) by Abramowitz-Stegun 7.1.26 on |z|, sign restored.
inline V erf_ps(V z) {
  const V a = abs(z), one = set1(1.0f);
  const V t = one / fmadd(set1(0.3275911f), a, one);
  V p = set1(1.061405429f);
  p = fmadd(p, t, set1(-1.453152027f));
  p = fmadd(p, t, set1(1.421413741f));
  p = fmadd(p, t, set1(-0.284496736f));
  p = fmadd(p, t, set1(0.254829592f));
  p = p * t;
  const V e = exp_ps(zero() - a * a);
  const V r = fnmadd(p, e, one);  // 1 - p e
  return select(lt(z, zero()), zero() - r, r);
}

inline V activate(V y, int64_t act) {
  const V half = set1(0.5f), one = set1(1.0f);
  switch (act) {
    case kRelu:  // max returns its second operand when one is NaN: NaN stays NaN, as torch.relu
      return max(zero(), y);
    case kSilu:
      return y * sigmoid_ps(y);
    case kGelu:
      return (half * y) * (one + erf_ps(y * set1(0.70710678118654752f)));
    case kGeluTanh: {  // 0.5 y (1 + tanh(u)) = y sigmoid(2u)
      const V y3 = (y * y) * y;
      const V u = set1(0.7978845608028654f) * fmadd(set1(0.044715f), y3, y);
      return y * sigmoid_ps(u + u);
    }
    default:
      return y;
  }
}

// activate on R rows' vectors at once: the switch once, the rows' chains side by side.
template <int R, int64_t A>
inline void activate_each(V* y) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) y[r] = activate(y[r], A);
}

template <int R>
inline void activate_rows(V* y, int64_t act) {
  switch (act) {
    case kRelu: return activate_each<R, kRelu>(y);
    case kSilu: return activate_each<R, kSilu>(y);
    case kGelu: return activate_each<R, kGelu>(y);
    case kGeluTanh: return activate_each<R, kGeluTanh>(y);
    default: return;
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
  V acc[R * MB];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MB; ++m) acc[r * MB + m] = zero();
  const S* ahead = w + kAhead * R * k;
  for (int64_t j = 0; j < k; j += 16) {
    if (Blocked) {  // R * 16 elements a step, one stream
      for (int l = 0; l < R * 16; l += kPerLine) prefetch_l1(ahead + j * R + l);
    } else if (j % kPerLine == 0) {
      for (int r = 0; r < R; ++r) prefetch_l1(ahead + r * k + j);
    }
    V xv[MB];
    for (int m = 0; m < MB; ++m) xv[m] = loadu(xf + m * k + j);
    for (int r = 0; r < R; ++r) {
      const V wv = load16(w + at_<Blocked>(r, j, k));
      for (int m = 0; m < MB; ++m) acc[r * MB + m] = fmadd(wv, xv[m], acc[r * MB + m]);
    }
  }
  for (int m = 0; m < MB; ++m)
    for (int r = 0; r < R; ++r) sums[m * ldo + r] = reduce_add(acc[r * MB + m]);
}

template <typename S, int R, bool Blocked>
inline void rows_of_w(const S* w, const float* xf, int64_t m_rows, int64_t k, float* sums, int64_t ldo) {
  for (int64_t m = 0; m < m_rows; m += kXRows)
    with_constant<kXRows>(static_cast<int>(m_rows - m), [&](auto mb) {
      block<S, R, decltype(mb)::value, Blocked>(w, xf + m * k, k, sums + m * ldo, ldo);
    });
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
      V y = loadu(sums + m * width + j);
      if (bias != nullptr) y = y + load16(bias + col);
      y = activate(y, act);
      if (res != nullptr) y = y + load16(res + m * n + col);
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
  V s = zero();
  for (int64_t j = 0; j < d; j += 16) s = s + loadu(y + j);
  mean = reduce_add(s) / static_cast<float>(d);
  const V m = set1(mean);
  s = zero();
  for (int64_t j = 0; j < d; j += 16) {
    const V t = loadu(y + j) - m;
    s = fmadd(t, t, s);
  }
  rstd = 1.0f / std::sqrt(reduce_add(s) / static_cast<float>(d) + eps);
}

// xf (M, K) = x in float32; with g and h (K,): LN(x) * g + h per row, mean and variance as row_mean_rstd.
template <typename S>
inline void widen_rows(const S* x, int64_t m, int64_t k, const S* g, const S* h, float eps, float* xf) {
  for (int64_t i = 0; i < m; ++i) {
    float* y = xf + i * k;
    for (int64_t j = 0; j < k; j += 16) storeu(y + j, load16(x + i * k + j));
    if (g == nullptr) continue;
    float mean, rstd;
    row_mean_rstd(y, k, eps, mean, rstd);
    const V mv = set1(mean), rv = set1(rstd);
    for (int64_t j = 0; j < k; j += 16) {
      const V t = (loadu(y + j) - mv) * rv;
      storeu(y + j, fmadd(t, load16(g + j), load16(h + j)));
    }
  }
}

// xb (M, K) = float32 rows xf rounded to bfloat16 (to nearest even), the panels' input.
inline void narrow_rows(const float* xf, int64_t m, int64_t k, uint16_t* xb) {
  for (int64_t j = 0; j < m * k; j += 16) store16(xb + j, loadu(xf + j));
}

}  // namespace attnkit_linear
}  // namespace ATTNKIT_VARIANT
