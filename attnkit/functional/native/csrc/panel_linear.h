// x W^T for 5 to a few dozen rows of x: the matrix products of a sentence's encoder layer or of a
// non-autoregressive decoder pass. (The checked entry point is small_linear in linear_ops.h; the epilogue,
// bias, activation, residual, LayerNorm, is small_linear.h's.)
//
// small_linear.h's dot products suit one to four rows: W streams once and each output ends in one
// horizontal sum. At a dozen rows those sums cost a third of the work, so here W is in panels of 16
// columns: W^T's rows, 16 outputs wide. For each step of K, the 16 outputs of NP panels take one load
// each, and every row of x broadcasts against them: MR rows x NP panels of 16 float32 sums stay in
// registers (up to 14 x 2 = 28 of the 32, with the two panels' loads and the broadcast 31) and no horizontal
// sum is needed. The rows are taken in near-equal tiles of at most 14 (a sentence of 13 or 14 rows in one
// pass over W, faster than 7 + 7 when W comes from memory: docs/design.md); each tile rereads its panels from L1 or
// L2. The first tile prefetches its panels kPrefetchRows rows of K ahead: weights a sentence's pass streams
// from L3 or memory (no other kernel runs between a model's layers to keep them in L2).
//
// float32: panels (N / 16, K, 16); x float32 rows, one FMA per (row, panel, step of K).
// bfloat16: panels (N / 16, K / 2, 16, 2), each two steps of K interleaved (VNNI order: element (j, c) of a
// panel at [j / 2][c][j % 2]), so one 64-byte load holds 16 outputs x 2 inputs; x is bfloat16 rows, and a
// row's pair (x_j, x_j+1), broadcast as one 32-bit word, meets them in one vdpbf16ps (AVX512-BF16): both
// exact products added to float32 sums, two steps of K per instruction, twice float32's rate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_linear {

using namespace attnkit_simd;

constexpr int kPanel = 16;     // outputs per panel
// Rows of x per register tile and panels per tile: 14 x 2 = 28 accumulators on AVX-512 (32 registers); 6 x 1
// where the registers hold 8 V (AVX2's 16 ymm, NEON's 32 q: 6 accumulators, a panel's load, a broadcast).
constexpr int kMaxTile = kWide ? 14 : 6;
constexpr int kTilePanels = kWide ? 2 : 1;
constexpr int kPrefetchRows = 64;  // rows of a panel prefetched ahead (4 KB of float32)

// sums[m * ldo + 16 p + c] = sum_j x[m * k + j] * W[panel p, j, c] for m < MR, p < NP: one register tile.
// (Variants with 8 V registers take 6 x 1: see kMaxTile.)
// x: rows of K from row 0 of the tile; w: the first panel; panel_stride = 16 K.
// Prefetch: the first tile of rows prefetches W ahead (past the panels' end: the next panels').
template <int MR, int NP, bool Prefetch>
__attribute__((noinline)) void panel_tile(const float* xf, const float* w, int64_t k, float* sums, int64_t ldo) {
  const int64_t panel_stride = k * kPanel;
  V acc[MR * NP];  // one dimension: GCC 12 keeps a 2-D array of AVX2's two-register V on the stack
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m * NP + p] = zero();
  for (int64_t j = 0; j < k; ++j) {
    if constexpr (Prefetch)
      for (int p = 0; p < NP; ++p) prefetch_l1(w + p * panel_stride + (j + kPrefetchRows) * kPanel);
    V wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = loadu(w + p * panel_stride + j * kPanel);
    for (int m = 0; m < MR; ++m) {
      const V xb = set1(xf[m * k + j]);
      for (int p = 0; p < NP; ++p) acc[m * NP + p] = fmadd(xb, wv[p], acc[m * NP + p]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) storeu(sums + m * ldo + p * kPanel, acc[m * NP + p]);
}

// The same tile for bfloat16: x bfloat16 rows of K, w pair-interleaved panels; two steps of K at a time.
// (A function of its own: the AVX512-BF16 target stays off the float32 tile, which CPUs without it run. Only
// the AVX-512 variant has it; elsewhere bfloat16 panels are refused at the entry point.)
#if ATTNKIT_AVX512
template <int MR, int NP, bool Prefetch>
ATTNKIT_BF16 inline void panel_tile(const uint16_t* xb, const uint16_t* w, int64_t k, float* sums, int64_t ldo) {
  const int64_t panel_stride = k * kPanel;
  __m512 acc[MR][NP];
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) acc[m][p] = _mm512_setzero_ps();
  for (int64_t j = 0; j < k; j += 2) {  // a pair of steps: one cache line of each panel
    if constexpr (Prefetch)
      for (int p = 0; p < NP; ++p)
        prefetch_l1(w + p * panel_stride + (j + kPrefetchRows) * kPanel);
    __m512i wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = _mm512_loadu_si512(w + p * panel_stride + j * kPanel);
    for (int m = 0; m < MR; ++m) {
      int32_t pair;
      std::memcpy(&pair, xb + m * k + j, 4);  // (x_j, x_j+1)
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      for (int p = 0; p < NP; ++p) acc[m][p] = _mm512_dpbf16_ps(acc[m][p], xv, (__m512bh)wv[p]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int p = 0; p < NP; ++p) _mm512_storeu_ps(sums + m * ldo + p * kPanel, acc[m][p]);
}
#else
template <int MR, int NP, bool Prefetch>
inline void panel_tile(const uint16_t*, const uint16_t*, int64_t, float*, int64_t) {}  // never called
#endif

// A tile of mr (1 .. kMaxTile) rows, the register count fixed at compile time.
template <int NP, bool Prefetch, typename S>
inline void panel_rows(int mr, const S* x, const S* w, int64_t k, float* sums, int64_t ldo) {
  with_constant<kMaxTile>(mr, [&](auto r) { panel_tile<decltype(r)::value, NP, Prefetch>(x, w, k, sums, ldo); });
}

// sums (M, n_end - n_begin) = x W^T for outputs [n_begin, n_end) (multiples of 16) of every row.
// x (M, K) and w in the panels above, both float32 or both bfloat16 (then on a CPU with AVX512-BF16 only).
template <typename S>
inline void panel_sums(const S* x, const S* w, int64_t m_rows, int64_t k, int64_t n_begin, int64_t n_end,
                       float* sums) {
  const int64_t width = n_end - n_begin;
  const int64_t tiles = (m_rows + kMaxTile - 1) / kMaxTile;
  for (int64_t c = 0; c < width; c += kTilePanels * kPanel) {
    const S* wc = w + (n_begin + c) * k;  // panel (n_begin + c) / 16 starts at 16 K of its index
    const bool two = kTilePanels == 2 && c + 2 * kPanel <= width;
    for (int64_t i = 0, m0 = 0; i < tiles; ++i) {  // near-equal tiles: 20 rows -> 10 + 10
      const int64_t m1 = (m_rows * (i + 1)) / tiles;
      const int mr = static_cast<int>(m1 - m0);
      float* out = sums + m0 * width + c;
      if (two && i == 0)
        panel_rows<2, true>(mr, x + m0 * k, wc, k, out, width);
      else if (two)
        panel_rows<2, false>(mr, x + m0 * k, wc, k, out, width);
      else if (kTilePanels == 2 || i == 0)  // (a lone last panel of AVX-512's pairs prefetches in every tile)
        panel_rows<1, true>(mr, x + m0 * k, wc, k, out, width);
      else
        panel_rows<1, false>(mr, x + m0 * k, wc, k, out, width);
      m0 = m1;
    }
  }
}

}  // namespace attnkit_linear
}  // namespace ATTNKIT_VARIANT
