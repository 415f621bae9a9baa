// Exact attention forward over a key window per query, for float32 or bfloat16 on AVX-512 CPUs
// (arithmetic in float32 either way).
//
// out[b, h, i] = sum_j softmax_j(scale * q[b, h, i] . k[b, h, j]) v[b, h, j] over the keys
// j in [c - left, c + right] with c = i + (Lk - Lq), clipped to [0, min(Lk, lengths[b])).
// Full attention is left = right = Lq + Lk; causal is right = 0. Also returns
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
//
// This file also binds ``short_forward`` (full attention for short sequences, ``short_attention.h``)
// and ``add_norm`` (residual addition then LayerNorm, ``add_norm.h``), so that the native kernels
// build as one extension.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "add_norm.h"
#include "short_attention.h"
#include "window_tiles.h"

namespace {

using namespace attnkit_window;

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

// Backward for 3-D contiguous float32 (N, L, d) tensors, d and dv multiples of 16 (the local backend's
// layout): returns (dq, dk, dv). Parallel over the N rows; each row's tiles run in order, so the
// key gradients, which neighbouring tiles share, are accumulated without races.
std::vector<torch::Tensor> window_backward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor out,
                                           torch::Tensor dout, torch::Tensor lse, torch::Tensor lengths,
                                           int64_t left, int64_t right, double scale) {
  for (const auto& t : {q, k, v, out, dout, lse})
    TORCH_CHECK(t.scalar_type() == torch::kFloat32 && t.is_contiguous(), "window_backward: contiguous float32");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "window_backward: q, k, v must be (N, L, d)");
  TORCH_CHECK(q.size(2) % 16 == 0 && v.size(2) % 16 == 0, "window_backward: d and dv must be multiples of 16");
  TORCH_CHECK(left >= 0 && right >= 0, "window_backward: left and right must be >= 0");
  TORCH_CHECK(lengths.numel() == 0 || (lengths.numel() == q.size(0) && lengths.scalar_type() == torch::kInt64 &&
                                       lengths.is_contiguous()), "window_backward: lengths must be (N,) int64");
  const int64_t n = q.size(0), lq = q.size(1), lk = k.size(1), d = q.size(2), dv = v.size(2);
  auto dq = torch::empty_like(q);
  auto dk = torch::zeros_like(k);
  auto dvt = torch::zeros_like(v);
  if (n == 0 || lq == 0) return {dq, dk, dvt};
  const int64_t* len = lengths.numel() ? lengths.data_ptr<int64_t>() : nullptr;
  const int64_t width = std::min<int64_t>(left, lk) + std::min<int64_t>(right, lk) + T;
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(width * T), dp(width * T), qt(d * T), dot(dv * T), qrow(T * d), dorow(T * dv), obuf(T * d);
    for (int64_t row = begin; row < end; ++row) {
      BackTile a{q.data_ptr<float>() + row * lq * d, k.data_ptr<float>() + row * lk * d,
                 v.data_ptr<float>() + row * lk * dv, out.data_ptr<float>() + row * lq * dv,
                 dout.data_ptr<float>() + row * lq * dv, lse.data_ptr<float>() + row * lq,
                 dq.data_ptr<float>() + row * lq * d, dk.data_ptr<float>() + row * lk * d,
                 dvt.data_ptr<float>() + row * lk * dv, lq,
                 len ? std::min<int64_t>(lk, std::max<int64_t>(len[row], 0)) : lk, lk - lq,
                 std::min<int64_t>(left, lk + lq), std::min<int64_t>(right, lk + lq), static_cast<int>(d),
                 static_cast<int>(dv), static_cast<float>(scale)};
      for (int64_t i0 = 0; i0 < lq; i0 += T)
        back_tile(a, i0, p.data(), dp.data(), qt.data(), dot.data(), qrow.data(), dorow.data(), obuf.data());
    }
  });
  return {dq, dk, dvt};
}

// Full attention for short sequences (``short_attention.h``). q (B, H, Lq, d), k (B, H, Lk, d),
// v (B, H, Lk, dv): all float32 or all bfloat16, any strides with the last dim contiguous; d % 16 == 0
// (bfloat16: d % 32 == 0), dv % 16 == 0. lengths: (B,) int64 key lengths, or empty for none.
// offsets: (S + 1,) int64 segment bounds for sequences packed along L (Lq == Lk == offsets[S]; each
// position attends within its segment), or empty. Returns out (B, H, Lq, dv) in q's dtype, a view of
// (B, Lq, H, dv) memory; rows with no key are 0.
torch::Tensor short_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v, torch::Tensor lengths,
                            torch::Tensor offsets, double scale) {
  const auto dt = q.scalar_type();
  TORCH_CHECK((dt == torch::kFloat32 || dt == torch::kBFloat16) && k.scalar_type() == dt && v.scalar_type() == dt,
              "short_forward: q, k, v must all be float32 or all bfloat16");
  TORCH_CHECK(dt == torch::kFloat32 || attnkit_short::cpu_has_bf16(), "short_forward: bfloat16 needs AVX512-BF16");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "short_forward: q, k, v must be (B, H, L, d)");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, "short_forward: last dim must be contiguous");
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) && v.size(1) == q.size(1) &&
              v.size(2) == k.size(2) && k.size(3) == q.size(3), "short_forward: q, k, v shapes do not match");
  const int64_t d = q.size(3), dv = v.size(3);
  TORCH_CHECK(d % (dt == torch::kFloat32 ? 16 : 32) == 0 && dv % 16 == 0,
              "short_forward: d must be a multiple of 16 (bfloat16: 32) and dv of 16");
  TORCH_CHECK(lengths.numel() == 0 || (lengths.numel() == q.size(0) && lengths.scalar_type() == torch::kInt64 &&
                                       lengths.is_contiguous()), "short_forward: lengths must be (B,) int64");
  const int64_t nb = q.size(0), nh = q.size(1), lq = q.size(2), lk = k.size(2);
  const int64_t nseg = offsets.numel() ? offsets.numel() - 1 : 0;
  const int64_t* off = nullptr;
  if (offsets.numel()) {
    TORCH_CHECK(offsets.scalar_type() == torch::kInt64 && offsets.is_contiguous() && offsets.dim() == 1 &&
                    lengths.numel() == 0 && lq == lk, "short_forward: offsets must be (S + 1,) int64, without lengths");
    off = offsets.data_ptr<int64_t>();
    TORCH_CHECK(off[0] == 0 && off[nseg] == lq, "short_forward: offsets must run from 0 to Lq == Lk");
    for (int64_t s = 0; s < nseg; ++s) TORCH_CHECK(off[s + 1] >= off[s], "short_forward: offsets must not decrease");
  }
  auto out = torch::empty({nb, lq, nh, dv}, q.options());
  if (out.numel() > 0) {
    const int64_t* len = lengths.numel() ? lengths.data_ptr<int64_t>() : nullptr;
    int64_t longest = lk;
    if (nseg) {
      longest = 0;
      for (int64_t s = 0; s < nseg; ++s) longest = std::max(longest, off[s + 1] - off[s]);
    }
    const int kw = static_cast<int>((longest + 15) / 16 * 16);
    const int64_t per_b = (nseg ? nseg : 1) * nh;  // jobs per batch row: (segment, head)
    auto go = [&](auto tag) {
      using S = decltype(tag);
      const S *qp = reinterpret_cast<const S*>(q.data_ptr()), *kp = reinterpret_cast<const S*>(k.data_ptr()),
              *vp = reinterpret_cast<const S*>(v.data_ptr());
      S* op = reinterpret_cast<S*>(out.data_ptr());
      at::parallel_for(0, nb * per_b, 1, [&](int64_t begin, int64_t end) {
        attnkit_short::Scratch w(static_cast<int>(d), static_cast<int>(dv), std::max(kw, 16));
        auto job_at = [&](int64_t job) {
          const int64_t b = job / per_b, s = (job % per_b) / nh, h = job % nh;
          const int64_t start = nseg ? off[s] : 0;
          const int64_t nq = nseg ? off[s + 1] - start : lq;
          const int64_t nk = nseg ? nq : (len ? std::min<int64_t>(lk, std::max<int64_t>(len[b], 0)) : lk);
          return attnkit_short::Seq<S>{qp + b * q.stride(0) + h * q.stride(1) + start * q.stride(2),
                                       kp + b * k.stride(0) + h * k.stride(1) + start * k.stride(2),
                                       vp + b * v.stride(0) + h * v.stride(1) + start * v.stride(2),
                                       op + ((b * lq + start) * nh + h) * dv, q.stride(2), k.stride(2), v.stride(2),
                                       nh * dv, static_cast<int>(nq), static_cast<int>(nk)};
        };
        for (int64_t job = begin; job < end; ++job) {
          const auto a = job_at(job);
          if (job + 1 < end) attnkit_short::prefetch<S>(job_at(job + 1), static_cast<int>(d), static_cast<int>(dv));
          attnkit_short::attend<S>(a, static_cast<int>(d), static_cast<int>(dv), static_cast<float>(scale), w);
        }
      });
    };
    if (dt == torch::kFloat32)
      go(float{});
    else
      go(uint16_t{});
  }
  return out.permute({0, 2, 1, 3});
}

// LayerNorm(x + r) over the last dimension (add_norm.h). x, r (..., d) contiguous, weight and bias (d,),
// all float32 or all bfloat16; d a multiple of 16. Inference only (no autograd).
torch::Tensor add_norm(const torch::Tensor& x, const torch::Tensor& r, const torch::Tensor& weight,
                       const torch::Tensor& bias, double eps) {
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == torch::kFloat32 || dt == torch::kBFloat16, "add_norm: x must be float32 or bfloat16");
  TORCH_CHECK(r.scalar_type() == dt && weight.scalar_type() == dt && bias.scalar_type() == dt,
              "add_norm: x, r, weight and bias must share one dtype");
  TORCH_CHECK(x.dim() >= 1 && r.sizes() == x.sizes(), "add_norm: r must have the shape of x");
  const int64_t d = x.size(-1);
  TORCH_CHECK(d % 16 == 0 && weight.dim() == 1 && weight.size(0) == d && bias.dim() == 1 && bias.size(0) == d,
              "add_norm: the last dimension must be a multiple of 16, weight and bias (d,)");
  TORCH_CHECK(x.is_contiguous() && r.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
              "add_norm: tensors must be contiguous");
  auto out = torch::empty_like(x);
  const int64_t rows = d ? x.numel() / d : 0;
  auto go = [&](auto tag) {
    using S = decltype(tag);
    const S *xp = reinterpret_cast<const S*>(x.data_ptr()), *rp = reinterpret_cast<const S*>(r.data_ptr()),
            *wp = reinterpret_cast<const S*>(weight.data_ptr()), *bp = reinterpret_cast<const S*>(bias.data_ptr());
    S* op = reinterpret_cast<S*>(out.data_ptr());
    const bool native_bf16 = attnkit_short::cpu_has_bf16();
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      std::vector<float> y(d);
      attnkit_norm::add_norm_rows<S>(xp, rp, wp, bp, op, begin, end, d, static_cast<float>(eps), y.data(), native_bf16);
    });
  };
  if (dt == torch::kFloat32)
    go(float{});
  else
    go(uint16_t{});
  return out;
}

bool short_bf16_supported() { return attnkit_short::cpu_has_bf16(); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("window_forward", &window_forward, "exact windowed attention forward (float32 / bfloat16, AVX-512)",
        py::call_guard<py::gil_scoped_release>());
  m.def("window_backward", &window_backward, "its backward (float32, recomputing the weights)",
        py::call_guard<py::gil_scoped_release>());
  m.def("short_forward", &short_forward, "full attention for short sequences (float32 / bfloat16, AVX-512)",
        py::call_guard<py::gil_scoped_release>());
  m.def("add_norm", &add_norm, "LayerNorm(x + r) over the last dimension (float32 / bfloat16, AVX-512)",
        py::call_guard<py::gil_scoped_release>());
  m.def("short_bf16_supported", &short_bf16_supported, "whether this CPU has AVX512-BF16");
}
