// The int8 linear layers' input side (int8_linear.h): float32 rows of x quantised to int8 at run time, as
// attnkit/inference/quant.py states it (its quantize_rows and outlier_channels are the reference):
//   - the `count` input channels with the largest |x| over the call's rows (NaN first) are the outliers: taken
//     out of the rows and multiplied in float32 by the epilogue (LLM.int8()'s decomposition, chosen per call);
//   - each row on its own, over its range: c = (max + min) / 2 and h = (max - min) / 2 of its other channels, then
//     a = round((x - c) act_max / h) (half to even, clamped to [-act_max, act_max], NaN to 0), s = h / act_max:
//     x ~= a s + c (a row of one value: a = 0, s = 0; NaN or inf carried to the outputs). The shift c gives the
//     row's integers its whole range where it is lopsided (a GELU's outputs: from -0.17 to tens) and costs the
//     epilogue c sum_k W[n, k];
// The int8 rows are kp wide (K rounded up to 64), zeros past K and at the outliers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_linear {

using namespace attnkit_simd;

constexpr int kMaxOutliers = 64;  // the entry points refuse more

// amax[c] = max over rows of |x[r, c]| for columns [c0, c1) (NaN where a row has NaN there); x rows of k. Row
// after row, so that x streams in order (column after column, every load was a cache line of its own).
inline void column_amax(const float* x, int64_t m, int64_t k, int64_t c0, int64_t c1, float* amax) {
  for (int64_t c = c0; c < c1; c += 16) store16(amax + c, zero(), first_lanes(c1 - c));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = c0; c < c1; c += 16) {
      const M lanes = first_lanes(c1 - c);
      const V acc = load16(amax + c, lanes), a = abs(load16(x + r * k + c, lanes));
      store16(amax + c, select(unord(acc, acc), acc, max(acc, a)), lanes);  // max gives a when a is NaN; NaN stays
    }
}

// Whether a ranks above b: NaN first, then by value; ties to the lower index (the caller scans in order).
inline bool ranks_above(float a, float b) { return (a != a && b == b) || a > b; }

// idx[0 .. count) = the columns of the `count` largest amax (count <= min(k, kMaxOutliers)), in rank order.
inline void top_columns(const float* amax, int64_t k, int count, int64_t* idx) {
  float best[kMaxOutliers];
  int n = 0;
  for (int64_t c = 0; c < k && count > 0; ++c) {
    const float a = amax[c];
    if (n == count && !ranks_above(a, best[n - 1])) continue;
    int i = n < count ? n++ : count - 1;  // the slot it takes, then moved up past those it ranks above
    for (; i > 0 && ranks_above(a, best[i - 1]); --i) best[i] = best[i - 1], idx[i] = idx[i - 1];
    best[i] = a, idx[i] = c;
  }
}

// Rows [r0, r1) of x (rows of k floats): q (rows of kp int8) and qb, their second plane (vec_int8.h's kPlane:
// |q|, q + 128 as u8, or none: left as it is), s and c (one each per row), cols (rows of `count` floats: the
// outlier channels idx, minus c). Two passes over each row, read from x: its range (the outliers replaced by
// another channel's value, so they make no new min or max), then the integers (0 written at the outliers after).
inline void quantize_rows(const float* x, int64_t k, int64_t kp, const int64_t* idx, int count, float act_max,
                          int plane, int64_t r0, int64_t r1, int8_t* q, int8_t* qb, float* s, float* shift,
                          float* cols) {
  int64_t other = 0;  // a channel that is not an outlier (idx is short: a few passes)
  while (other < k && std::find(idx, idx + count, other) != idx + count) ++other;
  int64_t blocks[kMaxOutliers];  // the blocks of 16 that hold an outlier, in order, and their outlier lanes
  uint32_t lanes[kMaxOutliers];
  int nb = 0;
  for (int c = 0; c < count; ++c) blocks[nb++] = idx[c] / 16;
  std::sort(blocks, blocks + nb);
  nb = static_cast<int>(std::unique(blocks, blocks + nb) - blocks);
  for (int b = 0; b < nb; ++b) {
    lanes[b] = 0;
    for (int c = 0; c < count; ++c)
      if (idx[c] / 16 == blocks[b]) lanes[b] |= 1u << (idx[c] % 16);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * k;
    const float fill = other < k ? xr[other] : 0.0f;
    V hi = set1(fill), lo = set1(fill);
    uint32_t nan = 0;
    for (int64_t j = 0, next = 0; j < k; j += 16) {
      const M in = first_lanes(k - j);
      V a = load16(xr + j, in);  // (lanes past k: 0, then left out below)
      if (next < nb && blocks[next] == j / 16) a = select(from_bits(lanes[next++]), set1(fill), a);
      nan |= bits(unord(a, a));
      hi = select(in, max(hi, a), hi);
      lo = select(in, zero() - max(zero() - lo, zero() - a), lo);
    }
    const float top = reduce_max(hi), bottom = -reduce_max(zero() - lo);
    const float mid = nan ? std::numeric_limits<float>::quiet_NaN() : 0.5f * (top + bottom);
    const float half = nan ? mid : 0.5f * (top - bottom);
    shift[r] = mid;
    s[r] = half / act_max;
    const float inv = act_max / half;  // as quant.quantize_rows: (x - c) (act_max / half), in float32
    for (int c = 0; c < count; ++c) cols[r * count + c] = xr[idx[c]] - mid;
    int8_t* qr = q + r * kp;
    const V up = set1(act_max), down = set1(-act_max), iv = set1(inv), mv = set1(mid);
    for (int64_t j = 0; j < k; j += 16) {
      const int64_t w = std::min<int64_t>(16, k - j);
      V y = round((load16(xr + j, first_lanes(w)) - mv) * iv);  // half to even
      y = select(unord(y, y), zero(), y);                        // NaN (0 inf, inf 0) -> 0
      store_i8(qr + j, select(gt(y, up), up, select(lt(y, down), down, y)), w);
    }
    for (int c = 0; c < count; ++c) qr[idx[c]] = 0;
    std::memset(qr + k, 0, static_cast<size_t>(kp - k));
    int8_t* br = qb + r * kp;
    if (plane == kPlaneAbs)
      for (int64_t j = 0; j < kp; ++j) br[j] = static_cast<int8_t>(qr[j] < 0 ? -qr[j] : qr[j]);
    else if (plane == kPlaneU8)
      for (int64_t j = 0; j < kp; ++j) br[j] = static_cast<int8_t>(static_cast<uint8_t>(qr[j]) ^ 0x80u);
  }
}

}  // namespace attnkit_linear
}  // namespace ATTNKIT_VARIANT
