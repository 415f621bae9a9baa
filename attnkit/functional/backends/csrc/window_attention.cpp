// Exact attention forward over a key window per query, for float32 or bfloat16 on AVX-512 CPUs
// (arithmetic in float32 either way).
//
// out[b, h, i] = sum_j softmax_j(scale * q[b, h, i] . k[b, h, j]) v[b, h, j] over the keys
// j in [c - left, c + right] with c = i + (Lk - Lq), clipped to [0, min(Lk, lengths[b])).
// Full attention is left = right = Lk; causal is right = 0. Also returns
// lse[b, h, i] = log sum_j exp(scale * q . k_j); rows with no key get out 0, lse +inf.
// q, k, v may be strided views (last dim contiguous), e.g. the heads of a fused QKV projection;
// out is written in (B, Lq, H, dv) memory, so merging the heads afterwards needs no copy.
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
#include <cstring>
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

// Element access for float and bfloat16 (stored as uint16_t; round to nearest even on the way out).
inline float to_f(float x) { return x; }
inline float to_f(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void store16(float* p, __m512 x) { _mm512_storeu_ps(p, x); }
inline void store16(uint16_t* p, __m512 x) {
  __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
}

// S^T rows t0 .. t0 + NK - 1 (NK <= 12): s[t][r] = sum_e k[t, e] * qt[e][r].
template <int NK, typename S>
inline void score_block(const S* k, int64_t ks, const float* qt, int d, float* s) {
  __m512 acc[NK];
  for (int j = 0; j < NK; ++j) acc[j] = _mm512_setzero_ps();
  for (int e = 0; e < d; ++e) {
    const __m512 qv = _mm512_loadu_ps(qt + e * T);
    for (int j = 0; j < NK; ++j) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(to_f(k[j * ks + e])), qv, acc[j]);
  }
  for (int j = 0; j < NK; ++j) _mm512_storeu_ps(s + j * T, acc[j]);
}

template <typename S>
void scores(const S* k, int64_t ks, const float* qt, int d, int nkeys, float* s) {
  int t = 0;
  for (; t + 12 <= nkeys; t += 12) score_block<12>(k + t * ks, ks, qt, d, s + t * T);
  const int rest = nkeys - t;
  const S* kk = k + t * ks;
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

// o[r, c0 .. c0 + 16 NV) for R rows r0 .. r0 + R - 1 = sum_t p[t][r] v[t, c0 ..], t in [ta, tb).
template <int R, int NV, typename S>
inline void pv_block(const float* p, const S* v, int64_t vs, int ta, int tb, int r0, int c0, float* o,
                     int64_t os) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int t = ta; t < tb; ++t) {
    __m512 vv[NV];
    for (int c = 0; c < NV; ++c) vv[c] = load16(v + t * vs + c0 + 16 * c);
    for (int r = 0; r < R; ++r) {
      const __m512 pr = _mm512_set1_ps(p[t * T + r0 + r]);
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pr, vv[c], acc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < NV; ++c) _mm512_storeu_ps(o + (r0 + r) * os + c0 + 16 * c, acc[r][c]);
}

template <int NV, typename S>
void pv_rows(const float* p, const S* v, int64_t vs, const int* ta, const int* tb, int c0, float* o,
             int64_t os) {
  for (int r0 = 0; r0 < T; r0 += 4) {
    const int a = std::min(std::min(ta[r0], ta[r0 + 1]), std::min(ta[r0 + 2], ta[r0 + 3]));
    const int b = std::max(std::max(tb[r0], tb[r0 + 1]), std::max(tb[r0 + 2], tb[r0 + 3]));
    pv_block<4, NV, S>(p, v, vs, a, std::max(a, b), r0, c0, o, os);
  }
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
  const S* v = a.v + lo * a.vs;
  for (int c0v = 0; c0v < a.dv; c0v += 64) {
    switch (std::min(4, (a.dv - c0v) / 16)) {
      case 4: pv_rows<4>(buf, v, a.vs, ta, tb, c0v, obuf, a.dv); break;
      case 3: pv_rows<3>(buf, v, a.vs, ta, tb, c0v, obuf, a.dv); break;
      case 2: pv_rows<2>(buf, v, a.vs, ta, tb, c0v, obuf, a.dv); break;
      default: pv_rows<1>(buf, v, a.vs, ta, tb, c0v, obuf, a.dv); break;
    }
  }
  alignas(64) float sums[T], mxs[T];
  _mm512_store_ps(sums, sum);
  _mm512_store_ps(mxs, mx);
  for (int r = 0; r < rows; ++r) {
    const bool live_row = sums[r] > 0.0f;
    const __m512 inv = _mm512_set1_ps(live_row ? 1.0f / sums[r] : 0.0f);  // empty rows: 0
    for (int c = 0; c < a.dv; c += 16)
      store16(out + r * a.os + c, _mm512_mul_ps(_mm512_loadu_ps(obuf + r * a.dv + c), inv));
    lse[r] = live_row ? mxs[r] + std::log(sums[r]) : std::numeric_limits<float>::infinity();
  }
}

template <typename S>
void run(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, const int64_t* len,
         torch::Tensor& out, torch::Tensor& lse, int64_t left, int64_t right, float scale) {
  const int64_t nb = q.size(0), nh = q.size(1), lq = q.size(2), lk = k.size(2), d = q.size(3), dv = v.size(3);
  const int64_t tiles = (lq + T - 1) / T;
  const int64_t width = std::min<int64_t>(left, lk) + std::min<int64_t>(right, lk) + T;
  const S *qp = reinterpret_cast<const S*>(q.data_ptr()), *kp = reinterpret_cast<const S*>(k.data_ptr()),
          *vp = reinterpret_cast<const S*>(v.data_ptr());
  S* op = reinterpret_cast<S*>(out.data_ptr());  // (B, Lq, H, dv) memory
  float* lp = lse.data_ptr<float>();               // (B, H, Lq)
  at::parallel_for(0, nb * nh * tiles, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> buf(width * T), qt(d * T), obuf(T * dv);
    for (int64_t job = begin; job < end; ++job) {
      const int64_t bh = job / tiles, b = bh / nh, h = bh % nh, i0 = (job % tiles) * T;
      Tile<S> a{qp + b * q.stride(0) + h * q.stride(1), kp + b * k.stride(0) + h * k.stride(1),
                vp + b * v.stride(0) + h * v.stride(1), op + (b * lq * nh + h) * dv, lp + bh * lq,
                q.stride(2), k.stride(2), v.stride(2), nh * dv, lq,
                len ? std::min<int64_t>(lk, std::max<int64_t>(len[b], 0)) : lk, lk - lq,
                std::min<int64_t>(left, lk + lq), std::min<int64_t>(right, lk + lq), static_cast<int>(d),
                static_cast<int>(dv), scale};
      tile(a, i0, buf.data(), qt.data(), obuf.data());
    }
  });
}

}  // namespace

// q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv): float32 or bfloat16 (all the same), any strides
// with the last dim contiguous; dv % 16 == 0. lengths: (B,) int64 key lengths, or empty for none.
// Returns out (B, H, Lq, dv) in q's dtype, a view of (B, Lq, H, dv) memory, and lse (B, H, Lq) float32.
std::vector<torch::Tensor> window_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor lengths,
                                          int64_t left, int64_t right, double scale) {
  const auto dt = q.scalar_type();
  TORCH_CHECK((dt == torch::kFloat32 || dt == torch::kBFloat16) && k.scalar_type() == dt && v.scalar_type() == dt,
              "window_forward: q, k, v must all be float32 or all bfloat16");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "window_forward: q, k, v must be (B, H, L, d)");
  TORCH_CHECK((q.stride(3) == 1 || q.size(3) == 1) && (k.stride(3) == 1 || k.size(3) == 1) && v.stride(3) == 1,
              "window_forward: last dim must be contiguous");
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) && v.size(1) == q.size(1) &&
              v.size(2) == k.size(2) && k.size(3) == q.size(3), "window_forward: q, k, v shapes do not match");
  TORCH_CHECK(v.size(3) % 16 == 0, "window_forward: dv must be a multiple of 16");
  TORCH_CHECK(left >= 0 && right >= 0, "window_forward: left and right must be >= 0");
  TORCH_CHECK(lengths.numel() == 0 || (lengths.numel() == q.size(0) && lengths.scalar_type() == torch::kInt64 &&
                                       lengths.is_contiguous()), "window_forward: lengths must be (B,) int64");
  const int64_t nb = q.size(0), nh = q.size(1), lq = q.size(2), dv = v.size(3);
  auto out = torch::empty({nb, lq, nh, dv}, q.options());
  auto lse = torch::empty({nb, nh, lq}, q.options().dtype(torch::kFloat32));
  if (out.numel() > 0) {
    const int64_t* len = lengths.numel() ? lengths.data_ptr<int64_t>() : nullptr;
    if (dt == torch::kFloat32)
      run<float>(q, k, v, len, out, lse, left, right, static_cast<float>(scale));
    else
      run<uint16_t>(q, k, v, len, out, lse, left, right, static_cast<float>(scale));
  }
  return {out.permute({0, 2, 1, 3}), lse};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("window_forward", &window_forward, "exact windowed attention forward (float32 / bfloat16, AVX-512)",
        py::call_guard<py::gil_scoped_release>());
}
