// act(x W^T + b) + r with W in int8 (symmetric, one scale per output) and x quantised per row at run time
// (int8_quant.h): the integer sums in int32, exact, then the scales, the outlier channels' float share, bias,
// activation and residual in float32. (The checked entry point is int8_ops.h; attnkit/inference/quant.py states
// the arithmetic, and int8_linear_reference there is the reference.)
//
//   y[m, n] = (s[m] sum_k a[m, k] q[n, k] + sum_{o in outliers} (x[m, o] - c[m]) q[n, o] + c[m] sum_k q[n, k])
//             scale[n] + b[n]
//
// The integer sums, in one of two layouts of W (K rounded up to 64 with zeros: kp; N to 16):
//   - blocked, (N / 4, kp / 64, 4, 64): each 4 rows interleaved in chunks of 64 bytes, one sequential stream: a
//     decoding step's few rows, dot products of a row of W with a row of a, as small_linear.h does in float32
//     (a quarter of its bytes to read);
//   - panels, (N / 16, kp / 4, 16, 4): 16 outputs x 4 inputs in 64 bytes (VNNI's order); a row's 4 inputs,
//     broadcast as one 32-bit word, meet them in one dot product of groups of four: 16 outputs' sums in the 16
//     int32 lanes, no horizontal sum (as panel_linear.h's bfloat16 pairs), MR rows x NP panels a register tile.
// The dot products are vec_int8.h's (Dot: the variant's own instructions; DotFast, after a run-time check:
// AVX512-VNNI's vpdpbusd or NEON's sdot). DotVnni's sums hold 128 sum_k q[n, k] besides; the epilogue takes
// off `wsum` (128 times each row's sum of W, made when W is packed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "int8_quant.h"
#include "panel_linear.h"
#include "small_linear.h"
#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_linear {

using namespace attnkit_simd;

constexpr int64_t kQChunk = 64;  // int8 rows are padded to a multiple of this (a Q)
// rows of x per panel tile and panels per tile: AVX-512 12 x 2 with VNNI (24 of 32 registers), 8 x 2 with the
// sign trick (its temporaries); 4 x 1 where the registers hold 8 V (AVX2: 2 ymm a V and 4 for the x operand)
template <typename D>
struct Tile {
  static constexpr int kRows = kWide ? (D::kOffset ? 12 : 8) : 4;
  static constexpr int kPanels = kWide ? 2 : 1;
};

// sums[m ldo + r] = sum_j a[m, j] W[n0 + r, j] for R rows of W (a block, blocked layout) and MB rows of a (b: their
// second plane, D::kPlane's, at the same offsets: rows of kp).
template <typename D, int R, int MB>
inline void block_body(const int8_t* w, const int8_t* a, const int8_t* b, int64_t kp, int32_t* sums, int64_t ldo) {
  I acc[R][MB];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m] = izero();
  const int8_t* ahead = w + 4 * kAhead * R * kp;  // (the loops over the tile unrolled: see panel_body)  // as many bytes ahead as small_linear.h's float32 rows
  for (int64_t j = 0; j < kp; j += kQChunk) {
    for (int l = 0; l < R * 64; l += 64) prefetch_l1(ahead + j * R + l);
    typename D::X xv[MB];
    for (int m = 0; m < MB; ++m) xv[m] = D::load(a + m * kp + j, b + m * kp + j);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const Q wv = loadq(w + j * R + r * 64);
      for (int m = 0; m < MB; ++m) acc[r][m] = D::dot(acc[r][m], xv[m], wv);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MB; ++m)
    for (int r = 0; r < R; ++r) sums[m * ldo + r] = reduce_add(acc[r][m]);
}

// A register tile is a function of its own, never inlined into its callers (inlined into them, GCC 12 kept the
// AVX2 accumulators in memory), compiled under DotFast's target where it takes DotFast's products.
#define ATTNKIT_TILE_FUNCTIONS(name, body, params, args)                                                    \
  template <int A, int B, bool C>                                                                          \
  __attribute__((noinline, flatten)) void name##_base params { body<Dot, A, B, C> args; }                  \
  template <int A, int B, bool C>                                                                          \
  ATTNKIT_FAST_DOT __attribute__((noinline, flatten)) void name##_fast params { body<DotFast, A, B, C> args; } \
  template <typename D, int A, int B, bool C>                                                              \
  inline void name params {                                                                                \
    if constexpr (kFastDot && std::is_same<D, DotFast>::value)                                             \
      name##_fast<A, B, C> args;                                                                           \
    else                                                                                                   \
      name##_base<A, B, C> args;                                                                           \
  }

template <typename D, int R, int MB, bool Unused>
inline void block_tile(const int8_t* w, const int8_t* a, const int8_t* b, int64_t kp, int32_t* sums, int64_t ldo) {
  block_body<D, R, MB>(w, a, b, kp, sums, ldo);
}
ATTNKIT_TILE_FUNCTIONS(block_i8, block_tile,
                       (const int8_t* w, const int8_t* a, const int8_t* b, int64_t kp, int32_t* sums, int64_t ldo),
                       (w, a, b, kp, sums, ldo))

// Outputs [n_begin, n_end) (multiples of 4; the blocked layout) of every row: sums (m_rows, n_end - n_begin).
template <typename D>
inline void blocked_sums_i8(const int8_t* a, const int8_t* b, const int8_t* w, int64_t m_rows, int64_t kp,
                            int64_t n_begin, int64_t n_end, int32_t* sums) {
  const int64_t width = n_end - n_begin;
  for (int64_t c = 0; c < width; c += 4)
    for (int64_t m = 0; m < m_rows; m += kXRows)
      with_constant<kXRows>(static_cast<int>(m_rows - m), [&](auto mb) {
        block_i8<D, 4, decltype(mb)::value, false>(w + (n_begin + c) * kp, a + m * kp, b + m * kp, kp,
                                                   sums + m * width + c, width);
      });
}

// sums[m ldo + 16 p + c] for MR rows of a and NP panels from w (panel stride 16 kp): one register tile.
template <typename D, int MR, int NP, bool Prefetch>
inline void panel_body(const int8_t* a, const int8_t* b, const int8_t* w, int64_t kp, int32_t* sums, int64_t ldo) {
  const int64_t panel_stride = kp * 16;
  I acc[MR][NP];
  // (the loops over the tile unrolled before the compiler decides where acc lives: registers, not the stack)
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m][p] = izero();
  for (int64_t g = 0; g < kp; g += 4) {  // 4 inputs: one cache line of each panel
    if (Prefetch)
      for (int p = 0; p < NP; ++p) prefetch_l1(w + p * panel_stride + (g + 4 * kPrefetchRows) * 16);
    Q wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = loadq(w + p * panel_stride + g * 16);
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const typename D::X xb = D::bcast(a + m * kp + g, b + m * kp + g);
#pragma GCC unroll 16
      for (int p = 0; p < NP; ++p) acc[m][p] = D::dot(acc[m][p], xb, wv[p]);
    }
  }
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) storeu(sums + m * ldo + p * 16, acc[m][p]);
}

ATTNKIT_TILE_FUNCTIONS(panel_tile_i8, panel_body,
                       (const int8_t* a, const int8_t* b, const int8_t* w, int64_t kp, int32_t* sums, int64_t ldo),
                       (a, b, w, kp, sums, ldo))
#undef ATTNKIT_TILE_FUNCTIONS

template <typename D, int NP, bool Prefetch>
inline void panel_rows_i8(int mr, const int8_t* a, const int8_t* b, const int8_t* w, int64_t kp, int32_t* sums,
                          int64_t ldo) {
  with_constant<Tile<D>::kRows>(mr, [&](auto r) {
    panel_tile_i8<D, decltype(r)::value, NP, Prefetch>(a, b, w, kp, sums, ldo);
  });
}

// Outputs [n_begin, n_end) (multiples of 16) of every row, W in panels: sums (m_rows, n_end - n_begin).
template <typename D>
inline void panel_sums_i8(const int8_t* a, const int8_t* b, const int8_t* w, int64_t m_rows, int64_t kp,
                          int64_t n_begin, int64_t n_end, int32_t* sums) {
  constexpr int kRows = Tile<D>::kRows, kPanels = Tile<D>::kPanels;
  const int64_t width = n_end - n_begin;
  const int64_t tiles = (m_rows + kRows - 1) / kRows;
  for (int64_t c = 0; c < width; c += kPanels * 16) {
    const int8_t* wc = w + (n_begin + c) * kp;  // panel (n_begin + c) / 16 starts at 16 kp of its index
    const bool two = kPanels == 2 && c + 32 <= width;
    for (int64_t i = 0, m0 = 0; i < tiles; ++i) {  // near-equal tiles
      const int64_t m1 = (m_rows * (i + 1)) / tiles;
      const int mr = static_cast<int>(m1 - m0);
      int32_t* out = sums + m0 * width + c;
      const int8_t *am = a + m0 * kp, *bm = b + m0 * kp;
      if (two && i == 0)
        panel_rows_i8<D, 2, true>(mr, am, bm, wc, kp, out, width);
      else if (two)
        panel_rows_i8<D, 2, false>(mr, am, bm, wc, kp, out, width);
      else if (kPanels == 2 || i == 0)  // (a lone last panel of AVX-512's pairs prefetches in every tile)
        panel_rows_i8<D, 1, true>(mr, am, bm, wc, kp, out, width);
      else
        panel_rows_i8<D, 1, false>(mr, am, bm, wc, kp, out, width);
      m0 = m1;
    }
  }
}

// What the epilogue takes besides the sums: per row its scale s, shift c and outlier values cols (count each, minus
// c); per output its scale, wsum (128 sum_k q[n, k]: the shift's share, and DotVnni's offset), bias (or null);
// wt = q^T (K, ld) for the outliers' rows.
struct Int8Epilogue {
  const float* s;
  const float* shift;
  const float* cols;
  const int64_t* idx;
  int count;
  const int8_t* wt;
  int64_t ld;
  const float* scale;
  const int32_t* wsum;
  bool offset;  // the sums hold wsum besides (DotVnni)
  const float* bias;
};

// Rows m .. m + R of one block of 16 outputs (col): R independent chains, so that the outliers' multiply-adds and
// the activation of several rows overlap (one row's are a chain of dependent instructions). ow: the outlier
// channels' weights of the block as floats, channel c at ow + c ld. C: their count, where known when compiled (0:
// e.count).
template <int R, int C, typename O>
inline void epilogue_rows(const int32_t* sums, int64_t width, const Int8Epilogue& e, const float* ow, int64_t ld,
                          const float* res, O* out, int64_t m, int64_t n, int64_t col, int64_t n_end, int64_t act) {
  const M lanes = first_lanes(n_end - col);
  const I wsum = loadi(e.wsum + col);
  const V wsum_f = to_float(wsum) * set1(1.0f / 128), scale = loadu(e.scale + col);
  const V bias = e.bias != nullptr ? loadu(e.bias + col) : zero();
  V y[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    I si = loadi(sums + (m + r) * width);
    if (e.offset) si = si - wsum;
    y[r] = fmadd(wsum_f, set1(e.shift[m + r]), to_float(si) * set1(e.s[m + r]));
  }
  const int count = C > 0 ? C : e.count;
  const float* cols = e.cols + m * count;
#pragma GCC unroll 8
  for (int c = 0; c < count; ++c) {
    const V w = loadu(ow + c * ld);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[r] = fmadd(set1(cols[r * count + c]), w, y[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) y[r] = fmadd(y[r], scale, bias);
  activate_rows<R>(y, act);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (res != nullptr) y[r] = y[r] + load16(res + (m + r) * n + col, lanes);
    store16(out + (m + r) * n + col, y[r], lanes);
  }
}

// out[m, n_begin .. n_end) (n_end <= n; the last block may be partial) from the int32 sums (m_rows, width),
// width = n_end - n_begin rounded up to 16: act(y) + res, y as the file's head says. O: float, or float sums
// for a LayerNorm after them (the same). A few rows at a time along their whole width: sums, res and out are
// read and written in order.
template <typename O>
inline void epilogue_i8(const int32_t* sums, int64_t width, const Int8Epilogue& e, const float* res, O* out,
                        int64_t m_rows, int64_t n, int64_t n_begin, int64_t n_end, int64_t act) {
  constexpr int kGroup = 4;  // rows a step (also on AVX2, where a V is two registers: 2% faster than 2 there)
  const auto ow = scratch_floats(static_cast<size_t>(std::max(e.count, 1)) * width);  // outliers' weights, floats
  for (int c = 0; c < e.count; ++c)
    for (int64_t j = 0; j < width; j += 16)
      storeu(ow.get() + c * width + j, load_i8(e.wt + e.idx[c] * e.ld + n_begin + j));
  const auto step = [&](auto rows, auto count, int64_t m) {
    for (int64_t j = 0; n_begin + j < n_end; j += 16)
      epilogue_rows<decltype(rows)::value, decltype(count)::value>(sums + j, width, e, ow.get() + j, width, res, out,
                                                                   m, n, n_begin + j, n_end, act);
  };
  const auto rows_of = [&](auto count) {  // (quant.py's 8 outliers: their loop unrolled)
    int64_t m = 0;
    for (; m + kGroup <= m_rows; m += kGroup) step(std::integral_constant<int, kGroup>{}, count, m);
    for (; m < m_rows; ++m) step(std::integral_constant<int, 1>{}, count, m);
  };
  if (e.count == 8)
    rows_of(std::integral_constant<int, 8>{});
  else
    rows_of(std::integral_constant<int, 0>{});
}

}  // namespace attnkit_linear
}  // namespace ATTNKIT_VARIANT
