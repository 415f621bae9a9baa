// Full attention for short sequences, one (sequence, head) at a time, on every CPU (bfloat16: AVX512-BF16). The checked entry
// point is in attention_ops.h; the Python backend is ``backends/short.py``.
//
// out[i] = sum_j softmax_j(scale * q[i] . k[j]) v[j] over the keys j < nk (padding: nk = length).
// For one (sequence, head):
//   1. K is transposed once into Kt (d x Lk16, keys along a V), 16 x 16 blocks in registers. In bfloat16 the
//      layout is AVX512-BF16's pair layout: Kt[p][j] holds k[j][2p] and k[j][2p+1] in one 32-bit lane. Keys
//      and values may be read through a row table (Seq::rows: a beam search's cache, never moved).
//   2. S (queries x Lk16) = Q K^T: a query's element (bfloat16: its pair of elements) broadcast against
//      Kt's rows; 4 queries x 4 key blocks of 16 = 16 accumulators. bfloat16 uses vdpbf16ps (bfloat16
//      products, float32 sums), float32 uses FMAs.
//   3. Softmax along each row in float32; P keeps the unnormalised exps (bfloat16: rounded to bfloat16,
//      as the math path rounds its weights) and 1/sum is applied to the output.
//   4. O = P V: P[i][j] (bfloat16: the pair j, j+1) broadcast against V's rows (bfloat16: two rows
//      interleaved into pair layout), up to 8 queries x 32 output features at a time.
// Whole rows of S and P stay in L1 for sentence lengths; queries are taken 64 at a time.
// NaN / inf: keys past nk are never read; a NaN or +inf score makes its row NaN (exp keeps NaN), as
// softmax does; a -inf score is a weight of 0 (a row of them gives zeros, as SDPA's kernel does).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_short {

using namespace attnkit_simd;

constexpr int QC = 64;  // queries per chunk (rows of S and P in the buffers)
// Register tiles (queries x blocks of 16 keys or 16 output features): AVX-512's 32 registers take 4 x 4 for
// Q K^T, 4 x up to 4 for whole rows (kw <= 64) and 8 x 2 for P V; variants with 8 V registers 6 x 1, 2 x up to 2
// (kw <= 32) and 6 x 1.
constexpr int kScoreQ = kWide ? 4 : 6, kScoreB = kWide ? 4 : 1;
constexpr int kRowQ = kWide ? 4 : 2, kRowKeys = kWide ? 64 : 32;
constexpr int kPvQ = kWide ? 8 : 6, kPvC = kWide ? 2 : 1;

inline uint32_t word(const uint16_t* p) {  // two bfloat16 as one 32-bit lane (unaligned-safe)
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

// ---- the register tile of steps 2 and 4; step 2: S rows for NQ queries x NB key blocks -------------

// The register tile both products use: acc[i][b] (16 floats) = sum over t < depth of a[i][t] * m[t][16 b ..].
// a: NQ rows, row stride as; m: depth rows of 16 NB 32-bit words, row stride ms. Q K^T takes a = Q,
// m = Kt; P V takes a = P, m = V (bfloat16: in pair layout). In bfloat16 a step t is one pair: a's
// elements 2t, 2t + 1 against m's pair words (vdpbf16ps).
// (bfloat16 only in the AVX-512 variant, on a CPU with AVX512-BF16: elsewhere the entry point refuses it, and
// these are never called.)
template <int NQ, int NB>
ATTNKIT_BF16 __attribute__((always_inline)) inline void accumulate_bf16(
    const uint16_t* a, int64_t as, const uint32_t* m, int64_t ms, int depth, V (&acc)[NQ * NB]) {
  for (int i = 0; i < NQ; ++i)
    for (int b = 0; b < NB; ++b) acc[i * NB + b] = zero();
#if ATTNKIT_AVX512
  for (int t = 0; t < depth; ++t) {
    __m512i mv[NB];
    for (int b = 0; b < NB; ++b) mv[b] = _mm512_loadu_si512(m + t * ms + 16 * b);
    for (int i = 0; i < NQ; ++i) {
      const __m512i ab = _mm512_set1_epi32(static_cast<int>(word(a + i * as + 2 * t)));
      for (int b = 0; b < NB; ++b) acc[i * NB + b].v = _mm512_dpbf16_ps(acc[i * NB + b].v, (__m512bh)mv[b], (__m512bh)ab);
    }
  }
#endif
}

template <int NQ, int NB>
ATTNKIT_BF16 inline void scores_bf16(const uint16_t* q, int64_t qs, const uint32_t* kt, int kw, int pairs, float* s) {
  V acc[NQ * NB];
  accumulate_bf16<NQ, NB>(q, qs, kt, kw, pairs, acc);
  for (int i = 0; i < NQ; ++i)
    for (int b = 0; b < NB; ++b) storeu(s + i * kw + 16 * b, acc[i * NB + b]);
}

// The max a row's scores are shifted by: a row whose scores are all -inf keeps them at -inf (weights 0).
inline float row_shift(float mx) { return mx == -std::numeric_limits<float>::infinity() ? 0.0f : mx; }

// 1 / (sum of a row's weights); a row with no weight gives zeros, a NaN sum stays NaN.
inline float inverse(float sum) { return sum == 0.0f ? 0.0f : 1.0f / sum; }

inline M live_keys(int nk, int j) { return first_lanes(nk - j); }  // lanes j .. j + 15 that are keys (< nk)

// The same tile in float32 (FMAs; a step t is one element).
// m(t): row t of m (Strided, or a row table's rows).
struct Strided {
  const float* p;
  int64_t s;
  const float* operator()(int64_t t) const { return p + t * s; }
};

template <int NQ, int NB, typename Rows>
__attribute__((always_inline)) inline void accumulate_f32(const float* a, int64_t as, Rows m, int depth,
                                                          V (&acc)[NQ * NB]) {
  for (int i = 0; i < NQ; ++i)
    for (int b = 0; b < NB; ++b) acc[i * NB + b] = zero();
  for (int t = 0; t < depth; ++t) {
    V mv[NB];
    const float* row = m(t);
    for (int b = 0; b < NB; ++b) mv[b] = loadu(row + 16 * b);
    for (int i = 0; i < NQ; ++i) {
      const V ab = set1(a[i * as + t]);
      for (int b = 0; b < NB; ++b) acc[i * NB + b] = fmadd(ab, mv[b], acc[i * NB + b]);
    }
  }
}

template <int NQ, int NB>
inline void scores_f32(const float* q, int64_t qs, const float* kt, int kw, int d, float* s) {
  V acc[NQ * NB];
  accumulate_f32<NQ, NB>(q, qs, Strided{kt, kw}, d, acc);
  for (int i = 0; i < NQ; ++i)
    for (int b = 0; b < NB; ++b) storeu(s + i * kw + 16 * b, acc[i * NB + b]);
}

#if ATTNKIT_AVX512
ATTNKIT_BF16 inline void store_p(uint16_t* p, V e) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(e.v));
}
#else
inline void store_p(uint16_t* p, V e) { store16(p, e); }
#endif
inline void store_p(float* p, V e) { storeu(p, e); }

// Whole rows at once (all kw = 16 NB keys): scores, then the softmax straight from the registers into P
// (unnormalised; bfloat16 for bfloat16 inputs) and 1 / sum into inv, for NQ queries. Used when the
// keys fit (kw <= kRowKeys). (Compiled with AVX512-BF16 allowed for both dtypes, so that the bfloat16
// helpers inline; the float32 instantiation uses no BF16 instruction.)
template <int NQ, int NB, typename S>
ATTNKIT_BF16 inline void rows(const S* q, int64_t qs, const uint32_t* kt, int kw, int depth, int nk, float scale,
                              std::conditional_t<sizeof(S) == 2, uint16_t, float>* p, float* inv) {
  V acc[NQ * NB];
  if constexpr (sizeof(S) == 2)
    accumulate_bf16<NQ, NB>(q, qs, kt, kw, depth, acc);
  else
    accumulate_f32<NQ, NB>(q, qs, Strided{reinterpret_cast<const float*>(kt), kw}, depth, acc);
  const V ninf = set1(-std::numeric_limits<float>::infinity()), sc = set1(scale);
  for (int i = 0; i < NQ; ++i) {
    V mx = ninf;
    for (int b = 0; b < NB; ++b) mx = max(mx, select(live_keys(nk, 16 * b), acc[i * NB + b] * sc, ninf));
    const V m = set1(row_shift(reduce_max(mx)));
    V sum = zero();
    for (int b = 0; b < NB; ++b) {
      const V e = zero_unless(live_keys(nk, 16 * b), exp_ps(fmsub(acc[i * NB + b], sc, m)));
      sum = sum + e;
      store_p(p + i * kw + 16 * b, e);
    }
    inv[i] = inverse(reduce_add(sum));
  }
}

// P and 1 / sum for queries [0, nq) when kw <= kRowKeys: kRowQ queries at a time.
template <typename S>
void rows_all(const S* q, int64_t qs, const uint32_t* kt, int kw, int depth, int nk, int nq, float scale,
              std::conditional_t<sizeof(S) == 2, uint16_t, float>* p, float* inv) {
  for (int i0 = 0; i0 < nq; i0 += kRowQ) {
    const int nqi = std::min(kRowQ, nq - i0);
    const S* qq = q + i0 * qs;
    auto* pp = p + i0 * kw;
    with_constant<kRowQ>(nqi, [&](auto nq_) {
      with_constant<kRowKeys / 16>(kw / 16, [&](auto nb_) {
        rows<decltype(nq_)::value, decltype(nb_)::value, S>(qq, qs, kt, kw, depth, nk, scale, pp, inv + i0);
      });
    });
  }
}

// S for queries [0, nq) (row stride kw), all kw / 16 key blocks: kScoreQ queries x up to kScoreB blocks per call.
template <typename S>
void scores(const S* q, int64_t qs, const uint32_t* kt, int kw, int depth, int nq, float* s) {
  for (int i0 = 0; i0 < nq; i0 += kScoreQ)
    for (int b0 = 0; b0 < kw / 16; b0 += kScoreB) {
      const int nqi = std::min(kScoreQ, nq - i0), nb = std::min(kScoreB, kw / 16 - b0);
      const S* qq = q + i0 * qs;
      float* ss = s + i0 * kw + 16 * b0;
      with_constant<kScoreQ>(nqi, [&](auto nq_) {
        with_constant<kScoreB>(nb, [&](auto nb_) {
          constexpr int NQ = decltype(nq_)::value, NB = decltype(nb_)::value;
          if constexpr (sizeof(S) == 2)
            scores_bf16<NQ, NB>(reinterpret_cast<const uint16_t*>(qq), qs, kt + 16 * b0, kw, depth, ss);
          else
            scores_f32<NQ, NB>(reinterpret_cast<const float*>(qq), qs, reinterpret_cast<const float*>(kt) + 16 * b0,
                               kw, depth, ss);
        });
      });
    }
}

// ---- step 3: softmax of row s (kw scores, keys >= nk masked) into p; returns 1 / sum ---------------
template <typename P>
inline float softmax_row(const float* s, int kw, int nk, float scale, P* p) {
  const V ninf = set1(-std::numeric_limits<float>::infinity()), sc = set1(scale);
  V mx = ninf;
  for (int j = 0; j < kw; j += 16) mx = max(mx, select(live_keys(nk, j), loadu(s + j) * sc, ninf));
  const V m = set1(row_shift(reduce_max(mx)));
  V sum = zero();
  for (int j = 0; j < kw; j += 16) {
    const V e = zero_unless(live_keys(nk, j), exp_ps(fmsub(loadu(s + j), sc, m)));
    sum = sum + e;
    store_p(p + j, e);
  }
  return inverse(reduce_add(sum));
}

// ---- step 4: O = P V for NQ queries x 16 NC output features ----------------------------------------
template <int NQ, int NC>
ATTNKIT_BF16 inline void pv_bf16(
    const uint16_t* p, int kw, const uint32_t* vp, int dv, int npairs, const float* inv, uint16_t* o, int64_t os) {
  V acc[NQ * NC];
  accumulate_bf16<NQ, NC>(p, kw, vp, dv, npairs, acc);
  for (int i = 0; i < NQ; ++i)
    for (int c = 0; c < NC; ++c) store_p(o + i * os + 16 * c, acc[i * NC + c] * set1(inv[i]));
}

template <int NQ, int NC, typename Rows>
inline void pv_f32(const float* p, int kw, Rows v, int nk, const float* inv, float* o, int64_t os) {
  V acc[NQ * NC];
  accumulate_f32<NQ, NC>(p, kw, v, nk, acc);
  for (int i = 0; i < NQ; ++i)
    for (int c = 0; c < NC; ++c) storeu(o + i * os + 16 * c, acc[i * NC + c] * set1(inv[i]));
}

// ---- one (sequence, head) ---------------------------------------------------------------------------
template <typename S>
struct Seq {
  const S *q, *k, *v;  // rows of q (nq, d), k (>= nk, d), v (>= nk, dv) with row strides qs, ks, vs
  S* o;                // (nq, dv), row stride os
  int64_t qs, ks, vs, os;
  int nq, nk;
  // Keys and values read through a row table (a beam search's K/V cache, whose rows stay where they were
  // written): key j at k + j ks + rows[j] krs, value j at v + j vs + rows[j] vrs. Null: k + j ks, v + j vs.
  const int64_t* rows = nullptr;
  int64_t krs = 0, vrs = 0;
  const S* key(int64_t j) const { return k + j * ks + (rows ? rows[j] * krs : 0); }
  const S* value(int64_t j) const { return v + j * vs + (rows ? rows[j] * vrs : 0); }
};

// Kt (cols x kw 32-bit words): Kt[c][j] = word c of key j (keys past nk: 0), 16 x 16 blocks transposed in
// registers (vec.h's transpose16). A key has `cols` words: d floats, or d / 2 bfloat16 pairs. cols % 16 == 0.
template <typename S>
inline void transpose_keys(const Seq<S>& a, int cols, int kw, uint32_t* kt) {
  float* out = reinterpret_cast<float*>(kt);
  for (int j0 = 0; j0 < kw; j0 += 16)
    for (int c0 = 0; c0 < cols; c0 += 16) {
      V r[16];
      for (int t = 0; t < 16; ++t)
        r[t] = j0 + t < a.nk ? loadu(reinterpret_cast<const float*>(a.key(j0 + t)) + c0) : zero();
      transpose16(r);
      for (int t = 0; t < 16; ++t) storeu(out + (c0 + t) * kw + j0, r[t]);
    }
}

// Scratch, sized once per thread for the longest key count.
struct Scratch {
  std::vector<uint32_t> kt, vp;  // Kt (d words x kw), bfloat16 V in pair layout (kw / 2 x dv words)
  std::vector<float> s, inv;     // S (QC x kw), 1 / sum (QC)
  std::vector<uint32_t> p;       // P (QC x kw), float32 or bfloat16 (half used)
  Scratch(int d, int dv, int kw)
      : kt(static_cast<size_t>(d) * kw), vp(static_cast<size_t>(kw / 2) * dv), s(QC * kw), inv(QC), p(QC * kw) {}
};

// Prefetches the n rows at p (step bytes apart, `bytes` long each) into L2 (prefetcht2): on the model's
// calls faster than into L1 (prefetcht0), where the next job's rows evict the current one's (docs/design.md).
inline void prefetch_rows(const void* p, int64_t step, int n, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int i = 0; i < n; ++i, c += step) {
    for (int64_t b = 0; b < bytes; b += 64) prefetch_l2(c + b);
    prefetch_l2(c + bytes - 1);  // the last line, if the row is not 64-byte aligned
  }
}

// Asks for a job's q, k and v rows one job ahead of its turn. The rows are one head's slice of each
// token's packed q/k/v, thousands of bytes apart, which the hardware prefetchers do not follow.
template <typename S>
inline void prefetch(const Seq<S>& a, int d, int dv) {
  constexpr int64_t e = sizeof(S);
  prefetch_rows(a.q, a.qs * e, a.nq, d * e);
  if (a.rows == nullptr) {
    prefetch_rows(a.k, a.ks * e, std::max(a.nk, 0), d * e);
    prefetch_rows(a.v, a.vs * e, std::max(a.nk, 0), dv * e);
    return;
  }
  for (int j = 0; j < a.nk; ++j) {
    prefetch_rows(a.key(j), 0, 1, d * e);
    prefetch_rows(a.value(j), 0, 1, dv * e);
  }
}

template <typename S>
void attend(const Seq<S>& a, int d, int dv, float scale, Scratch& w) {
  constexpr bool bf16 = sizeof(S) == 2;
  if (a.nk <= 0) {  // nothing to attend to: zeros
    for (int i = 0; i < a.nq; ++i) std::fill(a.o + i * a.os, a.o + i * a.os + dv, S(0));
    return;
  }
  const int kw = (a.nk + 15) / 16 * 16;  // keys padded to whole blocks
  const int words = bf16 ? d / 2 : d;    // 32-bit words per key row
  transpose_keys(a, words, kw, w.kt.data());
  const int npairs = (a.nk + 1) / 2;
#if ATTNKIT_AVX512
  if constexpr (bf16) {  // vp[t][c]: v[2t][c] in the low half, v[2t + 1][c] (or 0) in the high half
    for (int t = 0; t < npairs; ++t) {
      const uint16_t *lo = a.value(2 * t), *hi = 2 * t + 1 < a.nk ? a.value(2 * t + 1) : nullptr;
      for (int c = 0; c < dv; c += 16) {
        __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + c)));
        if (hi != nullptr)
          x = _mm512_or_si512(x, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                                       reinterpret_cast<const __m256i*>(hi + c))), 16));
        _mm512_storeu_si512(w.vp.data() + t * dv + c, x);
      }
    }
  }
#endif
  using P = std::conditional_t<bf16, uint16_t, float>;
  P* p = reinterpret_cast<P*>(w.p.data());
  for (int i0 = 0; i0 < a.nq; i0 += QC) {
    const int nq = std::min(QC, a.nq - i0);
    if (kw <= kRowKeys) {
      rows_all<S>(a.q + i0 * a.qs, a.qs, w.kt.data(), kw, words, a.nk, nq, scale, p, w.inv.data());
    } else {
      scores<S>(a.q + i0 * a.qs, a.qs, w.kt.data(), kw, words, nq, w.s.data());
      for (int i = 0; i < nq; ++i) w.inv[i] = softmax_row(w.s.data() + i * kw, kw, a.nk, scale, p + i * kw);
    }
    S* o = a.o + i0 * a.os;
    for (int r = 0; r < nq; r += kPvQ)
      for (int c = 0; c < dv; c += 16 * kPvC) {
        const int nr = std::min(kPvQ, nq - r), nc = std::min(kPvC, (dv - c) / 16);
        with_constant<kPvQ>(nr, [&](auto nr_) {
          with_constant<kPvC>(nc, [&](auto nc_) {
            constexpr int NQ = decltype(nr_)::value, NC = decltype(nc_)::value;
            if constexpr (bf16)
              pv_bf16<NQ, NC>(p + r * kw, kw, w.vp.data() + c, dv, npairs, w.inv.data() + r, o + r * a.os + c, a.os);
            else if (a.rows == nullptr)
              pv_f32<NQ, NC>(p + r * kw, kw, Strided{a.v + c, a.vs}, a.nk, w.inv.data() + r, o + r * a.os + c,
                             a.os);
            else
              pv_f32<NQ, NC>(p + r * kw, kw, [&a, c](int64_t t) { return a.value(t) + c; }, a.nk,
                             w.inv.data() + r, o + r * a.os + c, a.os);
          });
        });
      }
  }
}

}  // namespace attnkit_short
}  // namespace ATTNKIT_VARIANT
