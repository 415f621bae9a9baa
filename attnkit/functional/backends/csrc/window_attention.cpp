// Exact sliding-window attention forward for float32 on AVX-512 CPUs.
//
// out[n, i] = sum_j softmax_j(scale * q[n, i] . k[n, j]) v[n, j] over the keys
// j in [c - left, c + right] with c = i + (Lk - Lq), clipped to [0, min(Lk, lengths[n])).
// Also returns lse[n, i] = log sum_j exp(scale * q . k_j); rows with no key get out 0, lse +inf.
//
// Work is split into tiles of 16 queries (one zmm register across the queries). A tile's keys are
// the union of its rows' windows (left + right + 16 at most), so each query pays for at most 15
// keys it does not see, instead of the block-diagonal band of a dense tiled kernel.
//   1. S^T (keys x 16) = K_tile Q_tile^T: broadcast k[t, e] against the tile's transposed queries,
//      12 keys at a time (12 accumulators).
//   2. Softmax down each column, vectorised across the 16 queries, with the window mask per key.
//   3. O (16 x dv) = P^T V: broadcast P[t, r] against v[t, :], 4 rows x up to 64 dims at a time.
// The Python backend ("local") is the reference; tests compare the two on random shapes.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

constexpr int T = 16;  // queries per tile = floats per zmm

// exp(x) for x <= 0 (and -inf -> 0): Cody-Waite range reduction, degree-6 polynomial, scalef.
inline __m512 exp_ps(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // exp(-104) underflows to 0 after scalef
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// S^T rows t0 .. t0 + NK - 1 (NK <= 12): s[t][r] = sum_e k[t, e] * qt[e][r].
template <int NK>
inline void score_block(const float* k, int64_t ks, const float* qt, int d, float* s) {
  __m512 acc[NK];
  for (int j = 0; j < NK; ++j) acc[j] = _mm512_setzero_ps();
  for (int e = 0; e < d; ++e) {
    const __m512 qv = _mm512_loadu_ps(qt + e * T);
    for (int j = 0; j < NK; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(k[j * ks + e]), qv, acc[j]);
  }
  for (int j = 0; j < NK; ++j) _mm512_storeu_ps(s + j * T, acc[j]);
}

void scores(const float* k, int64_t ks, const float* qt, int d, int nkeys, float* s) {
  int t = 0;
  for (; t + 12 <= nkeys; t += 12) score_block<12>(k + t * ks, ks, qt, d, s + t * T);
  const int rest = nkeys - t;
  const float* kk = k + t * ks;
  float* ss = s + t * T;
  switch (rest) {
    case 11: score_block<11>(kk, ks, qt, d, ss); break;
    case 10: score_block<10>(kk, ks, qt, d, ss); break;
    case 9: score_block<9>(kk, ks, qt, d, ss); break;
    case 8: score_block<8>(kk, ks, qt, d, ss); break;
    case 7: score_block<7>(kk, ks, qt, d, ss); break;
    case 6: score_block<6>(kk, ks, qt, d, ss); break;
    case 5: score_block<5>(kk, ks, qt, d, ss); break;
    case 4: score_block<4>(kk, ks, qt, d, ss); break;
    case 3: score_block<3>(kk, ks, qt, d, ss); break;
    case 2: score_block<2>(kk, ks, qt, d, ss); break;
    case 1: score_block<1>(kk, ks, qt, d, ss); break;
    default: break;
  }
}

// o[r, c0 .. c0 + 16 NV) for R rows r0 .. r0 + R - 1 += sum_t p[t][r] v[t, c0 ..], t in [ta, tb).
template <int R, int NV>
inline void pv_block(const float* p, const float* v, int64_t vs, int ta, int tb, int r0, int c0, float* o,
                     int64_t os) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int t = ta; t < tb; ++t) {
    __m512 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = _mm512_loadu_ps(v + t * vs + c0 + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pr = _mm512_set1_ps(p[t * T + r0 + r]);
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pr, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(o + (r0 + r) * os + c0 + 16 * c, acc[r][c]);
}

template <int NV>
void pv_rows(const float* p, const float* v, int64_t vs, const int* ta, const int* tb, int c0, float* o,
             int64_t os) {
  for (int r0 = 0; r0 < T; r0 += 4) {
    const int a = std::min(std::min(ta[r0], ta[r0 + 1]), std::min(ta[r0 + 2], ta[r0 + 3]));
    const int b = std::max(std::max(tb[r0], tb[r0 + 1]), std::max(tb[r0 + 2], tb[r0 + 3]));
    pv_block<4, NV>(p, v, vs, a, std::max(a, b), r0, c0, o, os);
  }
}

struct Tile {
  const float *q, *k, *v;  // this row's (Lq, d), (Lk, d), (Lk, dv), contiguous
  float *out, *lse;         // (Lq, dv), (Lq,)
  int64_t lq, lk_eff, off, left, right;
  int d, dv;
  float scale;
};

// One tile of 16 queries starting at i0; buf holds (left + right + T) * T scores.
void tile(const Tile& a, int64_t i0, float* buf, float* qt, float* obuf) {
  const int rows = static_cast<int>(std::min<int64_t>(T, a.lq - i0));
  const int64_t c0 = i0 + a.off;  // key aligned with the tile's first query
  const int64_t lo = std::max<int64_t>(0, c0 - a.left);
  const int64_t hi = std::min<int64_t>(a.lk_eff, c0 + (T - 1) + a.right + 1);
  float* out = a.out + i0 * a.dv;
  float* lse = a.lse + i0;
  if (hi <= lo) {  // no row of this tile sees a key
    std::fill(out, out + rows * a.dv, 0.0f);
    std::fill(lse, lse + rows, std::numeric_limits<float>::infinity());
    return;
  }
  const int nk = static_cast<int>(hi - lo);
  // qt[e][r] = scale * q[i0 + r, e] (rows past Lq: 0)
  for (int e = 0; e < a.d; ++e)
    for (int r = 0; r < T; ++r) qt[e * T + r] = r < rows ? a.scale * a.q[(i0 + r) * a.d + e] : 0.0f;
  scores(a.k + lo * a.d, a.d, qt, a.d, nk, buf);
  // row r sees keys t (tile-relative) with lo + t in [c0 + r - left, c0 + r + right]
  //   <=>  r >= lo + t - c0 - right  and  r <= lo + t - c0 + left
  const __m512i iota = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 mx = ninf;
  for (int t = 0; t < nk; ++t) {
    const int64_t base = lo + t - c0;
    const __mmask16 ok = _mm512_cmpge_epi32_mask(iota, _mm512_set1_epi32(static_cast<int>(base - a.right))) &
                         _mm512_cmple_epi32_mask(iota, _mm512_set1_epi32(static_cast<int>(base + a.left)));
    const __m512 s = _mm512_mask_blend_ps(ok, ninf, _mm512_loadu_ps(buf + t * T));
    _mm512_storeu_ps(buf + t * T, s);
    mx = _mm512_max_ps(mx, s);
  }
  const __mmask16 live = _mm512_cmp_ps_mask(mx, ninf, _CMP_NEQ_OQ);
  const __m512 shift = _mm512_mask_blend_ps(live, _mm512_setzero_ps(), mx);
  __m512 sum = _mm512_setzero_ps();
  for (int t = 0; t < nk; ++t) {
    const __m512 s = _mm512_loadu_ps(buf + t * T);
    const __mmask16 ok = _mm512_cmp_ps_mask(s, ninf, _CMP_NEQ_OQ);  // masked keys give exactly 0
    const __m512 e = _mm512_maskz_mov_ps(ok, exp_ps(_mm512_sub_ps(s, shift)));
    _mm512_storeu_ps(buf + t * T, e);
    sum = _mm512_add_ps(sum, e);
  }
  // per-row key range (tile-relative) for the P V product: [ta, tb)
  int ta[T], tb[T];
  for (int r = 0; r < T; ++r) {
    const int64_t a0 = std::max<int64_t>(lo, c0 + r - a.left), b0 = std::min<int64_t>(hi, c0 + r + a.right + 1);
    ta[r] = static_cast<int>(std::min<int64_t>(std::max<int64_t>(a0 - lo, 0), nk));
    tb[r] = static_cast<int>(std::max<int64_t>(std::min<int64_t>(b0 - lo, nk), ta[r]));
  }
  const float* v = a.v + lo * a.dv;
  for (int c0v = 0; c0v < a.dv; c0v += 64) {
    switch (std::min(4, (a.dv - c0v) / 16)) {
      case 4: pv_rows<4>(buf, v, a.dv, ta, tb, c0v, obuf, a.dv); break;
      case 3: pv_rows<3>(buf, v, a.dv, ta, tb, c0v, obuf, a.dv); break;
      case 2: pv_rows<2>(buf, v, a.dv, ta, tb, c0v, obuf, a.dv); break;
      default: pv_rows<1>(buf, v, a.dv, ta, tb, c0v, obuf, a.dv); break;
    }
  }
  alignas(64) float sums[T], mxs[T];
  _mm512_store_ps(sums, sum);
  _mm512_store_ps(mxs, mx);
  for (int r = 0; r < rows; ++r) {
    if (sums[r] > 0.0f) {
      const float inv = 1.0f / sums[r];
      for (int c = 0; c < a.dv; ++c) out[r * a.dv + c] = obuf[r * a.dv + c] * inv;
      lse[r] = mxs[r] + std::log(sums[r]);
    } else {
      std::fill(out + r * a.dv, out + (r + 1) * a.dv, 0.0f);
      lse[r] = std::numeric_limits<float>::infinity();
    }
  }
}

}  // namespace

// q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv): float32, contiguous, dv % 16 == 0.
// lengths: (N,) int64 key lengths, or an empty tensor for none. Returns (out (N, Lq, dv), lse (N, Lq)).
std::vector<torch::Tensor> window_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor lengths,
                                          int64_t left, int64_t right, double scale) {
  TORCH_CHECK(q.dtype() == torch::kFloat32 && k.dtype() == torch::kFloat32 && v.dtype() == torch::kFloat32,
              "window_forward: float32 only");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "window_forward: q, k, v must be (N, L, d)");
  TORCH_CHECK(q.is_contiguous() && k.is_contiguous() && v.is_contiguous(), "window_forward: contiguous inputs");
  TORCH_CHECK(v.size(2) % 16 == 0, "window_forward: dv must be a multiple of 16");
  TORCH_CHECK(left >= 0 && right >= 0, "window_forward: left and right must be >= 0");
  const int64_t n = q.size(0), lq = q.size(1), lk = k.size(1), d = q.size(2), dv = v.size(2);
  auto out = torch::empty({n, lq, dv}, q.options());
  auto lse = torch::empty({n, lq}, q.options());
  if (n == 0 || lq == 0) return {out, lse};
  const int64_t* len = lengths.numel() ? lengths.data_ptr<int64_t>() : nullptr;
  const int64_t tiles = (lq + T - 1) / T;
  const int64_t width = std::min<int64_t>(left, lk) + std::min<int64_t>(right, lk) + T;
  const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
  float *op = out.data_ptr<float>(), *lp = lse.data_ptr<float>();
  at::parallel_for(0, n * tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(width * T), qt(d * T), obuf(T * dv);
    for (int64_t job = begin; job < end; ++job) {
      const int64_t row = job / tiles, i0 = (job % tiles) * T;
      Tile a{qp + row * lq * d, kp + row * lk * d, vp + row * lk * dv, op + row * lq * dv, lp + row * lq,
             lq, len ? std::min<int64_t>(lk, std::max<int64_t>(len[row], 0)) : lk, lk - lq,
             std::min<int64_t>(left, lk + lq), std::min<int64_t>(right, lk + lq), static_cast<int>(d),
             static_cast<int>(dv), static_cast<float>(scale)};
      tile(a, i0, buf.data(), qt.data(), obuf.data());
    }
  });
  return {out, lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("window_forward", &window_forward, "exact sliding-window attention forward (float32, AVX-512)",
        py::call_guard<py::gil_scoped_release>());
}
