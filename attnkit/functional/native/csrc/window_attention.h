// Exact attention over a key window per query, forward and backward, on every CPU (float32 inside;
// float32 or bfloat16 storage for the forward, float32 for the backward). The forward takes any head size (a
// last, partial group of 16 value columns through masked loads and stores), the backward multiples of 16.
// The checked entry points are in attention_ops.h; the Python backends "tiled" and "local" call them.
//
// out[b, h, i] = sum_j softmax_j(scale * q[b, h, i] . k[b, h, j]) v[b, h, j] over the keys
// j in [c - left, c + right] with c = i + (Lk - Lq), clipped to [0, min(Lk, lengths[b])).
// Full attention is left = right = Lq + Lk; causal is right = 0. Also returns
// lse[b, h, i] = log sum_j exp(scale * q . k_j); rows with no key get out 0, lse +inf.
//
// Work is split into tiles of 16 queries (one V across the queries). A tile's keys are
// the union of its rows' windows (left + right + 16 at most), so each query pays for at most 15
// keys it does not see, instead of the block-diagonal band of a dense tiled kernel.
//   1. S^T (keys x 16) = K_tile Q_tile^T: broadcast k[t, e] against the tile's transposed queries,
//      12 keys at a time (12 accumulators; 6 where the registers hold 8 V).
//   2. Softmax down each column, vectorised across the 16 queries, with the window mask per key.
//   3. O (16 x dv) = P^T V: broadcast P[t, r] against v[t, :], 4 rows x up to 64 dims at a time (16 with 8 V).
// NaN / inf: a key outside a row's window never enters that row (its score is replaced, not added
// to, and its value is never multiplied in, not even by 0); one inside propagates as in IEEE maths, and
// a -inf score is a weight of 0 (a row of them gives zeros, as SDPA's kernel does).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_window {

using namespace attnkit_simd;

constexpr int T = 16;  // queries per tile = lanes of a V
// Register tiles: keys per score block (12 accumulators on AVX-512, 6 where the registers hold 8 V) and groups
// of 16 value columns per P V block of 4 rows (4 x 4 on AVX-512, 4 x 1 elsewhere).
constexpr int kKeys = kWide ? 12 : 6;
constexpr int kCols = kWide ? 4 : 1;

// S^T rows t0 .. t0 + NK - 1 (NK <= kKeys): s[t][r] = sum_e k[t, e] * qt[e][r].
template <int NK, typename S>
inline void score_block(const S* k, int64_t ks, const float* qt, int d, float* s) {
  V acc[NK];
  for (int j = 0; j < NK; ++j) acc[j] = zero();
  for (int e = 0; e < d; ++e) {
    const V qv = loadu(qt + e * T);
    for (int j = 0; j < NK; ++j) acc[j] = fmadd(set1(to_f(k[j * ks + e])), qv, acc[j]);
  }
  for (int j = 0; j < NK; ++j) storeu(s + j * T, acc[j]);
}

template <typename S>
void scores(const S* k, int64_t ks, const float* qt, int d, int nkeys, float* s) {
  for (int t = 0; t < nkeys; t += kKeys)
    with_constant<kKeys>(nkeys - t, [&](auto nk) { score_block<decltype(nk)::value>(k + t * ks, ks, qt, d, s + t * T); });
}

// o[r, c0 .. c0 + 16 NV) for R rows r0 .. r0 + R - 1 = sum_t p[t][r] v[t, c0 ..] over row r's keys
// t in [ta[r], tb[r]). Keys every row sees take the plain product; at the edges of the rows' ranges a
// row takes only its own keys, so a NaN / inf value outside a row's window never reaches it (0 * NaN).
// ``last``: the lanes of the last group of 16 columns that exist (all 16 unless dv % 16: a partial group,
// read and written with masks).
template <int R, int NV, typename S>
inline void pv_block(const float* p, const S* v, int64_t vs, const int* ta, const int* tb, int r0, int c0, float* o,
                     int64_t os, M last) {
  int a = ta[r0], b = tb[r0], ia = ta[r0], ib = tb[r0];  // union [a, b), intersection [ia, ib)
  for (int r = 1; r < R; ++r) {
    a = std::min(a, ta[r0 + r]);
    b = std::max(b, tb[r0 + r]);
    ia = std::max(ia, ta[r0 + r]);
    ib = std::min(ib, tb[r0 + r]);
  }
  V acc[R * NV];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) acc[r * NV + c] = zero();
  auto step = [&](int t, bool all) {
    V vv[NV];
    for (int c = 0; c < NV; ++c) {
      const S* row = v + t * vs + c0 + 16 * c;
      vv[c] = c + 1 < NV ? load16(row) : load16(row, last);
    }
    for (int r = 0; r < R; ++r) {
      if (!all && (t < ta[r0 + r] || t >= tb[r0 + r])) continue;
      const V pr = set1(p[t * T + r0 + r]);
      for (int c = 0; c < NV; ++c) acc[r * NV + c] = fmadd(pr, vv[c], acc[r * NV + c]);
    }
  };
  const int mid = std::min(ia, b);
  for (int t = a; t < mid; ++t) step(t, false);
  for (int t = ia; t < ib; ++t) step(t, true);
  for (int t = std::max(ia, ib); t < b; ++t) step(t, false);
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c)
      store16(o + (r0 + r) * os + c0 + 16 * c, acc[r * NV + c], c + 1 < NV ? all_lanes() : last);
}

template <int NV, typename S>
void pv_rows(const float* p, const S* v, int64_t vs, const int* ta, const int* tb, int c0, float* o,
             int64_t os, M last) {
  for (int r0 = 0; r0 < T; r0 += 4) pv_block<4, NV, S>(p, v, vs, ta, tb, r0, c0, o, os, last);
}

template <typename S>
struct Tile {
  const S *q, *k, *v;  // one (b, h): rows of q (Lq, d), k (Lk, d), v (Lk, dv), row strides qs, ks, vs
  S* out;              // (Lq, dv), row stride os
  float* lse;          // (Lq,), contiguous
  int64_t qs, ks, vs, os, lq, lk_eff, off, left, right;
  int d, dv;
  float scale;
};

// One tile of 16 queries starting at i0; buf holds (left + right + T) * T scores.
template <typename S>
void tile(const Tile<S>& a, int64_t i0, float* buf, float* qt, float* obuf) {
  const int rows = static_cast<int>(std::min<int64_t>(T, a.lq - i0));
  const int64_t c0 = i0 + a.off;  // key aligned with the tile's first query
  const int64_t lo = std::max<int64_t>(0, c0 - a.left);
  const int64_t hi = std::min<int64_t>(a.lk_eff, c0 + (T - 1) + a.right + 1);
  S* out = a.out + i0 * a.os;
  float* lse = a.lse + i0;
  if (hi <= lo) {  // no row of this tile sees a key
    for (int r = 0; r < rows; ++r) std::fill(out + r * a.os, out + r * a.os + a.dv, S(0));
    std::fill(lse, lse + rows, std::numeric_limits<float>::infinity());
    return;
  }
  const int nk = static_cast<int>(hi - lo);
  // qt[e][r] = scale * q[i0 + r, e] (rows past Lq: 0)
  for (int e = 0; e < a.d; ++e)
    for (int r = 0; r < T; ++r) qt[e * T + r] = r < rows ? a.scale * to_f(a.q[(i0 + r) * a.qs + e]) : 0.0f;
  scores(a.k + lo * a.ks, a.ks, qt, a.d, nk, buf);
  // row r sees keys t (tile-relative) with lo + t in [c0 + r - left, c0 + r + right]
  //   <=>  r >= lo + t - c0 - right  and  r <= lo + t - c0 + left
  const V ninf = set1(-std::numeric_limits<float>::infinity());
  auto in_window = [&](int t) {  // the rows (lanes) that see key lo + t
    const int64_t base = lo + t - c0;
    return lane_range(base - a.right, base + a.left);
  };
  V mx = ninf;
  for (int t = 0; t < nk; ++t) {
    const V s = select(in_window(t), loadu(buf + t * T), ninf);
    storeu(buf + t * T, s);
    mx = max(mx, s);
  }
  // A row whose max is -inf has no key (or only -inf scores): shift 0, its weights are all 0. A NaN score
  // gives a NaN weight below, whatever mx is, so the row comes out NaN.
  const V shift = select(neq(mx, ninf), mx, zero());
  V sum = zero();
  for (int t = 0; t < nk; ++t) {
    const V e = zero_unless(in_window(t), exp_ps(loadu(buf + t * T) - shift));
    storeu(buf + t * T, e);
    sum = sum + e;
  }
  // per-row key range (tile-relative) for the P V product: [ta, tb)
  int ta[T], tb[T];
  for (int r = 0; r < T; ++r) {
    const int64_t a0 = std::max<int64_t>(lo, c0 + r - a.left), b0 = std::min<int64_t>(hi, c0 + r + a.right + 1);
    ta[r] = static_cast<int>(std::min<int64_t>(std::max<int64_t>(a0 - lo, 0), nk));
    tb[r] = static_cast<int>(std::max<int64_t>(std::min<int64_t>(b0 - lo, nk), ta[r]));
  }
  const S* v = a.v + lo * a.vs;
  const int groups = (a.dv + 15) / 16;  // of 16 columns, the last one partial where dv % 16
  const M tail = first_lanes(a.dv - 16 * (groups - 1));
  for (int g = 0; g < groups; g += kCols) {
    const int nv = std::min(kCols, groups - g);
    const M last = g + nv == groups ? tail : all_lanes();
    with_constant<kCols>(nv, [&](auto n) { pv_rows<decltype(n)::value>(buf, v, a.vs, ta, tb, 16 * g, obuf, a.dv, last); });
  }
  alignas(64) float sums[T], mxs[T];
  storeu(sums, sum);
  storeu(mxs, mx);
  for (int r = 0; r < rows; ++r) {
    const bool live_row = sums[r] != 0.0f;  // a NaN sum is live (and NaN)
    const V inv = set1(live_row ? 1.0f / sums[r] : 0.0f);  // rows with no weight: 0
    for (int c = 0; c < a.dv; c += 16) {
      const M m = first_lanes(a.dv - c);
      store16(out + r * a.os + c, load16(obuf + r * a.dv + c, m) * inv, m);
    }
    lse[r] = live_row ? mxs[r] + std::log(sums[r]) : std::numeric_limits<float>::infinity();
  }
}

// ---- backward ----------------------------------------------------------------------------------

// dst[t0 + j, c] += mult * sum_r coef[(t0 + j) * T + r] * rows[r, c] for j < J, c < 16 NV (+ c0).
template <int J, int NV>
inline void accum_block(const float* coef, const float* rows, int w, int t0, int c0, float* dst, int64_t ds,
                        V mult) {
  V acc[J * NV];
  for (int j = 0; j < J; ++j)
    for (int c = 0; c < NV; ++c) acc[j * NV + c] = zero();
  for (int r = 0; r < T; ++r) {
    V x[NV];
    for (int c = 0; c < NV; ++c) x[c] = loadu(rows + r * w + c0 + 16 * c);
    for (int j = 0; j < J; ++j) {
      const V b = set1(coef[(t0 + j) * T + r]);
      for (int c = 0; c < NV; ++c) acc[j * NV + c] = fmadd(b, x[c], acc[j * NV + c]);
    }
  }
  for (int j = 0; j < J; ++j)
    for (int c = 0; c < NV; ++c) {
      float* p = dst + (t0 + j) * ds + c0 + 16 * c;
      storeu(p, fmadd(mult, acc[j * NV + c], loadu(p)));
    }
}

// dst[t, :w] += mult * sum_r coef[t][r] rows[r, :w] for t < nt; rows is (16, w), w % 16 == 0.
template <int NV>
void accum_cols(const float* coef, const float* rows, int w, int c0, int nt, float* dst, int64_t ds, float m) {
  const V mult = set1(m);
  int t = 0;
  for (; t + 4 <= nt; t += 4) accum_block<4, NV>(coef, rows, w, t, c0, dst, ds, mult);
  for (; t < nt; ++t) accum_block<1, NV>(coef, rows, w, t, c0, dst, ds, mult);
}

inline void accum(const float* coef, const float* rows, int w, int nt, float* dst, int64_t ds, float m) {
  for (int c0 = 0; c0 < w; c0 += 16 * kCols)
    with_constant<kCols>((w - c0) / 16, [&](auto n) { accum_cols<decltype(n)::value>(coef, rows, w, c0, nt, dst, ds, m); });
}

struct BackTile {
  const float *q, *k, *v, *out, *dout, *lse;  // one row n: (Lq, d), (Lk, d), (Lk, dv), (Lq, dv) x2, (Lq,)
  float *dq, *dk, *dv;                         // (Lq, d), (Lk, d), (Lk, dv); dk, dv accumulate
  int64_t lq, lk_eff, off, left, right;
  int d, dvw;
  float scale;
};

// Gradients from one tile of 16 queries starting at i0 (flash-attention backward, recomputing P):
//   P = exp(S - lse), dP = dO V^T, dS = P * (dP - delta) with delta = rowsum(dO * O),
//   dQ = scale dS K, dK += scale dS^T Q, dV += P^T dO.
// Buffers: p, dp (left + right + T) * T; qt (d * T); dot (dv * T); qrow (T * d); dorow (T * dv); obuf (T * d).
inline void back_tile(const BackTile& a, int64_t i0, float* p, float* dp, float* qt, float* dot, float* qrow,
                      float* dorow, float* obuf) {
  const int rows = static_cast<int>(std::min<int64_t>(T, a.lq - i0));
  const int64_t c0 = i0 + a.off;
  const int64_t lo = std::max<int64_t>(0, c0 - a.left);
  const int64_t hi = std::min<int64_t>(a.lk_eff, c0 + (T - 1) + a.right + 1);
  float* dq = a.dq + i0 * a.d;
  if (hi <= lo) {
    std::fill(dq, dq + rows * a.d, 0.0f);
    return;
  }
  const int nk = static_cast<int>(hi - lo);
  alignas(64) float lse[T], delta[T];
  for (int r = 0; r < T; ++r) {
    const bool in = r < rows;
    lse[r] = in ? a.lse[i0 + r] : std::numeric_limits<float>::infinity();
    float acc = 0.0f;
    for (int c = 0; c < a.dvw; ++c) {
      const float g = in ? a.dout[(i0 + r) * a.dvw + c] : 0.0f;
      dorow[r * a.dvw + c] = g;
      dot[c * T + r] = g;
      if (in) acc += g * a.out[(i0 + r) * a.dvw + c];
    }
    delta[r] = acc;
    for (int e = 0; e < a.d; ++e) {
      const float x = in ? a.q[(i0 + r) * a.d + e] : 0.0f;
      qrow[r * a.d + e] = x;
      qt[e * T + r] = a.scale * x;
    }
  }
  scores(a.k + lo * a.d, static_cast<int64_t>(a.d), qt, a.d, nk, p);          // S^T
  scores(a.v + lo * a.dvw, static_cast<int64_t>(a.dvw), dot, a.dvw, nk, dp);  // dP^T
  const V lsev = loadu(lse), deltav = loadu(delta);
  const M live = neq(lsev, set1(std::numeric_limits<float>::infinity()));
  const V shift = zero_unless(live, lsev);
  for (int t = 0; t < nk; ++t) {
    const int64_t base = lo + t - c0;
    const M ok = live & lane_range(base - a.right, base + a.left);
    const V pv = zero_unless(ok, exp_ps(loadu(p + t * T) - shift));
    storeu(p + t * T, pv);
    storeu(dp + t * T, pv * (loadu(dp + t * T) - deltav));  // dS
  }
  int ta[T], tb[T];
  for (int r = 0; r < T; ++r) {
    const int64_t a0 = std::max<int64_t>(lo, c0 + r - a.left), b0 = std::min<int64_t>(hi, c0 + r + a.right + 1);
    ta[r] = static_cast<int>(std::min<int64_t>(std::max<int64_t>(a0 - lo, 0), nk));
    tb[r] = static_cast<int>(std::max<int64_t>(std::min<int64_t>(b0 - lo, nk), ta[r]));
  }
  for (int c0q = 0; c0q < a.d; c0q += 16 * kCols)  // dQ (16 x d) = dS^T K into obuf
    with_constant<kCols>((a.d - c0q) / 16, [&](auto n) {
      pv_rows<decltype(n)::value>(dp, a.k + lo * a.d, a.d, ta, tb, c0q, obuf, a.d, all_lanes());
    });
  for (int r = 0; r < rows; ++r)
    for (int e = 0; e < a.d; ++e) dq[r * a.d + e] = a.scale * obuf[r * a.d + e];
  accum(dp, qrow, a.d, nk, a.dk + lo * a.d, a.d, a.scale);  // dK += scale dS^T Q
  accum(p, dorow, a.dvw, nk, a.dv + lo * a.dvw, a.dvw, 1.0f);  // dV += P^T dO
}

}  // namespace attnkit_window
}  // namespace ATTNKIT_VARIANT
