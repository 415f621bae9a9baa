// The attention kernels' entry points: every property a kernel relies on is checked here (TORCH_CHECK,
// a Python RuntimeError), so a direct call with bad tensors fails cleanly instead of crashing.
//   window_forward / window_backward: exact attention over a key window (window_attention.h)
//   short_forward: full attention over short sequences, padding or packed segments (short_attention.h)
// Included once by each extension's one translation unit (module.cpp; the inference layer's compositions.cpp):
// torch's headers are parsed once per build.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <vector>

#include "short_attention.h"
#include "window_attention.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

using at::Tensor;
using attnkit_window::T;

constexpr int64_t kMaxSize = INT_MAX / 64;  // sizes the kernels keep in int, with room for their arithmetic

inline void check_cpu(const Tensor& t, const char* who, const char* name) {
  TORCH_CHECK(t.defined() && t.device().is_cpu(), who, ": `", name, "` must be a CPU tensor");
}

inline void check_sizes(const Tensor& t, const char* who, const char* name) {
  for (int64_t s : t.sizes()) TORCH_CHECK(s <= kMaxSize, who, ": `", name, "` has a dimension larger than ", kMaxSize);
}

// Padding lengths: empty (none), or (rows,) int64, contiguous, on the CPU.
inline const int64_t* lengths_ptr(const Tensor& lengths, int64_t rows, const char* who) {
  check_cpu(lengths, who, "lengths");
  if (lengths.numel() == 0) return nullptr;
  TORCH_CHECK(lengths.dim() == 1 && lengths.size(0) == rows && lengths.scalar_type() == at::kLong &&
                  lengths.is_contiguous(), who, ": `lengths` must be (", rows, ",) int64 and contiguous");
  return lengths.data_ptr<int64_t>();
}

// q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv), all one dtype (float32 or bfloat16) on the CPU, the
// last dim contiguous (q and k: or of size 1), leading dims equal (any_batch: k and v of any equal B').
inline void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, const char* who, bool any_batch = false) {
  check_cpu(q, who, "q");
  check_cpu(k, who, "k");
  check_cpu(v, who, "v");
  const auto dt = q.scalar_type();
  TORCH_CHECK((dt == at::kFloat || dt == at::kBFloat16) && k.scalar_type() == dt && v.scalar_type() == dt, who,
              ": q, k, v must all be float32 or all bfloat16");
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, who, ": q, k, v must be (B, H, L, d)");
  TORCH_CHECK((any_batch || k.size(0) == q.size(0)) && v.size(0) == k.size(0) && k.size(1) == q.size(1) &&
                  v.size(1) == q.size(1) &&
                  v.size(2) == k.size(2) && k.size(3) == q.size(3), who, ": q, k, v shapes do not match");
  TORCH_CHECK((q.stride(3) == 1 || q.size(3) == 1) && (k.stride(3) == 1 || k.size(3) == 1) &&
                  (v.stride(3) == 1 || v.size(3) <= 1), who, ": the last dim of q, k, v must be contiguous");
  check_sizes(q, who, "q");
  check_sizes(k, who, "k");
  check_sizes(v, who, "v");
}

template <typename S>
void window_run(const Tensor& q, const Tensor& k, const Tensor& v, const int64_t* len, Tensor& out, Tensor& lse,
                int64_t left, int64_t right, float scale) {
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
      attnkit_window::Tile<S> a{qp + b * q.stride(0) + h * q.stride(1), kp + b * k.stride(0) + h * k.stride(1),
                                vp + b * v.stride(0) + h * v.stride(1), op + (b * lq * nh + h) * dv, lp + bh * lq,
                                q.stride(2), k.stride(2), v.stride(2), nh * dv, lq,
                                len ? std::min<int64_t>(lk, std::max<int64_t>(len[b], 0)) : lk, lk - lq,
                                std::min<int64_t>(left, lk + lq), std::min<int64_t>(right, lk + lq),
                                static_cast<int>(d), static_cast<int>(dv), scale};
      attnkit_window::tile(a, i0, buf.data(), qt.data(), obuf.data());
    }
  });
}


// q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv): float32 or bfloat16 (all the same), any strides with the
// last dim contiguous; any d and dv. lengths: (B,) int64 key lengths, or empty for none.
// Returns out (B, H, Lq, dv) in q's dtype, a view of (B, Lq, H, dv) memory, and lse (B, H, Lq) float32.
inline std::vector<Tensor> window_forward(Tensor q, Tensor k, Tensor v, Tensor lengths, int64_t left, int64_t right,
                                   double scale) {
  check_qkv(q, k, v, "window_forward");
  TORCH_CHECK(left >= 0 && right >= 0, "window_forward: left and right must be >= 0");
  const int64_t* len = lengths_ptr(lengths, q.size(0), "window_forward");
  left = std::min<int64_t>(left, kMaxSize);  // wider than Lq + Lk changes nothing
  right = std::min<int64_t>(right, kMaxSize);
  const int64_t nb = q.size(0), nh = q.size(1), lq = q.size(2), dv = v.size(3);
  auto out = at::empty({nb, lq, nh, dv}, q.options());
  auto lse = at::empty({nb, nh, lq}, q.options().dtype(at::kFloat));
  if (out.numel() > 0) {
    if (q.scalar_type() == at::kFloat)
      window_run<float>(q, k, v, len, out, lse, left, right, static_cast<float>(scale));
    else
      window_run<uint16_t>(q, k, v, len, out, lse, left, right, static_cast<float>(scale));
  } else {
    lse.fill_(std::numeric_limits<float>::infinity());
  }
  return {out.permute({0, 2, 1, 3}), lse};
}

// Backward for 3-D contiguous float32 (N, L, d) tensors, d and dv multiples of 16 (the local backend's
// layout): q (N, Lq, d), k (N, Lk, d), v (N, Lk, dv), out and dout (N, Lq, dv), lse (N, Lq). Returns
// (dq, dk, dv). Parallel over the N rows; each row's tiles run in order, so the key gradients, which
// neighbouring tiles share, are accumulated without races.
inline std::vector<Tensor> window_backward(Tensor q, Tensor k, Tensor v, Tensor out, Tensor dout, Tensor lse,
                                           Tensor lengths, int64_t left, int64_t right, double scale) {
  const char* who = "window_backward";
  const char* names[] = {"q", "k", "v", "out", "dout", "lse"};
  int i = 0;
  for (const auto& t : {q, k, v, out, dout, lse}) {
    check_cpu(t, who, names[i]);
    TORCH_CHECK(t.scalar_type() == at::kFloat && t.is_contiguous(), who, ": `", names[i], "` must be contiguous float32");
    check_sizes(t, who, names[i++]);
  }
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, who, ": q, k, v must be (N, L, d)");
  const int64_t n = q.size(0), lq = q.size(1), lk = k.size(1), d = q.size(2), dv = v.size(2);
  TORCH_CHECK(k.size(0) == n && v.size(0) == n && v.size(1) == lk && k.size(2) == d, who,
              ": q, k, v shapes do not match");
  TORCH_CHECK(out.dim() == 3 && out.size(0) == n && out.size(1) == lq && out.size(2) == dv && dout.sizes() == out.sizes(),
              who, ": `out` and `dout` must be (N, Lq, dv)");
  TORCH_CHECK(lse.dim() == 2 && lse.size(0) == n && lse.size(1) == lq, who, ": `lse` must be (N, Lq)");
  TORCH_CHECK(d % 16 == 0 && dv % 16 == 0, who, ": d and dv must be multiples of 16");
  TORCH_CHECK(left >= 0 && right >= 0, who, ": left and right must be >= 0");
  const int64_t* len = lengths_ptr(lengths, n, who);
  left = std::min<int64_t>(left, kMaxSize);
  right = std::min<int64_t>(right, kMaxSize);
  auto dq = at::empty_like(q);
  auto dk = at::zeros_like(k);
  auto dvt = at::zeros_like(v);
  if (n == 0 || lq == 0) return {dq, dk, dvt};
  const int64_t width = std::min<int64_t>(left, lk) + std::min<int64_t>(right, lk) + T;
  at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> p(width * T), dp(width * T), qt(d * T), dot(dv * T), qrow(T * d), dorow(T * dv), obuf(T * d);
    for (int64_t row = begin; row < end; ++row) {
      attnkit_window::BackTile a{q.data_ptr<float>() + row * lq * d, k.data_ptr<float>() + row * lk * d,
                                 v.data_ptr<float>() + row * lk * dv, out.data_ptr<float>() + row * lq * dv,
                                 dout.data_ptr<float>() + row * lq * dv, lse.data_ptr<float>() + row * lq,
                                 dq.data_ptr<float>() + row * lq * d, dk.data_ptr<float>() + row * lk * d,
                                 dvt.data_ptr<float>() + row * lk * dv, lq,
                                 len ? std::min<int64_t>(lk, std::max<int64_t>(len[row], 0)) : lk, lk - lq,
                                 std::min<int64_t>(left, lk + lq), std::min<int64_t>(right, lk + lq),
                                 static_cast<int>(d), static_cast<int>(dv), static_cast<float>(scale)};
      for (int64_t i0 = 0; i0 < lq; i0 += T)
        attnkit_window::back_tile(a, i0, p.data(), dp.data(), qt.data(), dot.data(), qrow.data(), dorow.data(),
                                  obuf.data());
    }
  });
  return {dq, dk, dvt};
}

// A row table (B, >= lk) int64, its last dim contiguous, each of row b's first nk(b) entries (lengths: the
// padding's; else lk) in [0, rows_of_k): its data. `allowed`: false where the call cannot take one (offsets).
inline const int64_t* row_table(const Tensor& rows, int64_t b, int64_t lk, int64_t rows_of_k, const int64_t* len,
                                bool allowed, const char* who) {
  check_cpu(rows, who, "rows");
  TORCH_CHECK(allowed, who, ": `rows` cannot go with `offsets`");
  TORCH_CHECK(rows.scalar_type() == at::kLong && rows.dim() == 2 && rows.size(0) == b && rows.size(1) >= lk &&
                  (rows.stride(1) == 1 || rows.size(1) <= 1), who, ": `rows` must be (", b, ", >= ", lk,
              ") int64 with its last dim contiguous, got ", rows.sizes());
  const int64_t* p = rows.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t nk = len ? std::min<int64_t>(lk, std::max<int64_t>(len[r], 0)) : lk;
    for (int64_t j = 0; j < nk; ++j) {
      const int64_t x = p[r * rows.stride(0) + j];
      TORCH_CHECK(x >= 0 && x < rows_of_k, who, ": `rows` values must be in [0, ", rows_of_k, "), got ", x);
    }
  }
  return p;
}

// Full attention for short sequences (short_attention.h). q (B, H, Lq, d), k (B, H, Lk, d), v (B, H, Lk, dv):
// all float32 or all bfloat16 (bfloat16 needs AVX512-BF16), any strides with the last dim contiguous;
// d % 16 == 0 (bfloat16: d % 32 == 0), d > 0, dv % 16 == 0. lengths: (B,) int64 key lengths, or empty.
// offsets: (S + 1,) int64 segment bounds for sequences packed along L (Lq == Lk == offsets[S]; each
// position attends within its segment), or empty. rows: none, or (B, >= Lk) int64, the last dim contiguous:
// key and value j of batch row b are those of row rows[b, j] of k and v (B', H, Lk, d), any B' (a beam
// search's K/V cache, read where each position was written). Returns out (B, H, Lq, dv) in q's dtype, a view of
// (B, Lq, H, dv) memory; rows with no key are 0.
inline Tensor short_forward(Tensor q, Tensor k, Tensor v, Tensor lengths, Tensor offsets, double scale,
                            const std::optional<Tensor>& rows) {
  const char* who = "short_forward";
  const bool indirect = rows.has_value() && rows->defined();
  check_qkv(q, k, v, who, indirect);
  const auto dt = q.scalar_type();
  TORCH_CHECK(dt == at::kFloat || attnkit_simd::cpu_has_bf16(), who, ": bfloat16 needs AVX512-BF16");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, who, ": the last dim must be contiguous");
  const int64_t d = q.size(3), dv = v.size(3);
  TORCH_CHECK(d > 0 && d % (dt == at::kFloat ? 16 : 32) == 0 && dv % 16 == 0, who,
              ": d must be a positive multiple of 16 (bfloat16: 32) and dv a multiple of 16");
  const int64_t nb = q.size(0), nh = q.size(1), lq = q.size(2), lk = k.size(2);
  const int64_t* len = lengths_ptr(lengths, nb, who);
  check_cpu(offsets, who, "offsets");
  const int64_t nseg = offsets.numel() ? offsets.numel() - 1 : 0;
  const int64_t* off = nullptr;
  if (offsets.numel()) {
    TORCH_CHECK(offsets.scalar_type() == at::kLong && offsets.is_contiguous() && offsets.dim() == 1 && !len &&
                    lq == lk, who, ": offsets must be (S + 1,) int64, without lengths, and Lq == Lk");
    off = offsets.data_ptr<int64_t>();
    TORCH_CHECK(off[0] == 0 && off[nseg] == lq, who, ": offsets must run from 0 to Lq == Lk");
    for (int64_t s = 0; s < nseg; ++s) TORCH_CHECK(off[s + 1] >= off[s], who, ": offsets must not decrease");
  }
  const int64_t* table = indirect ? row_table(*rows, nb, lk, k.size(0), len, !off, who) : nullptr;
  auto out = at::empty({nb, lq, nh, dv}, q.options());
  if (out.numel() == 0) return out.permute({0, 2, 1, 3});
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
        const int64_t kb = table ? 0 : b;  // through the table: rows[b, j] picks k's row
        return attnkit_short::Seq<S>{qp + b * q.stride(0) + h * q.stride(1) + start * q.stride(2),
                                     kp + kb * k.stride(0) + h * k.stride(1) + start * k.stride(2),
                                     vp + kb * v.stride(0) + h * v.stride(1) + start * v.stride(2),
                                     op + ((b * lq + start) * nh + h) * dv, q.stride(2), k.stride(2), v.stride(2),
                                     nh * dv, static_cast<int>(nq), static_cast<int>(nk),
                                     table ? table + b * rows->stride(0) : nullptr, k.stride(0), v.stride(0)};
      };
      for (int64_t job = begin; job < end; ++job) {
        const auto a = job_at(job);
        if (job + 1 < end) attnkit_short::prefetch<S>(job_at(job + 1), static_cast<int>(d), static_cast<int>(dv));
        attnkit_short::attend<S>(a, static_cast<int>(d), static_cast<int>(dv), static_cast<float>(scale), w);
      }
    });
  };
  if (dt == at::kFloat)
    go(float{});
  else
    go(uint16_t{});
  return out.permute({0, 2, 1, 3});
}

inline bool cpu_has_bf16() { return attnkit_simd::cpu_has_bf16(); }

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
