// act(x W^T + b) + r, or LN(r + x W^T + b), with W in int8: the checked entry point of int8_linear.h. Included
// once by module.cpp (and by the inference layer's compositions.cpp, whose layers take Int8Weight too).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "add_norm.h"
#include "attention_ops.h"
#include "int8_linear.h"
#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

// A linear layer's int8 weight as the kernels take it, checked once when it is made (attnkit/inference/
// quant_linear.py packs it): w, q (N, K) in one layout, blocked (N' / 4, kp / 64, 4, 64) or panels
// (N' / 16, kp / 4, 16, 4) (N' = N rounded up to 16, kp = K up to 64, zeros there); wt = q^T (K, N') int8;
// scale (N',) float32 (W ~= q scale); wsum (N',) int32, 128 sum_k q[n, k]; bias (N',) float32 or empty (none);
// outputs N, the layer's own; outliers, the input channels a call keeps in float32; act_max, the rows' integers'
// bound (quant.py's ACT_MAX: 1 .. 127).
struct Int8Weight {
  at::Tensor w, wt, scale, wsum, bias;
  int64_t outputs, outliers;
  double act_max;

  Int8Weight(at::Tensor w_, at::Tensor wt_, at::Tensor scale_, at::Tensor wsum_, at::Tensor bias_, int64_t outputs_,
             int64_t outliers_, double act_max_)
      : w(std::move(w_)), wt(std::move(wt_)), scale(std::move(scale_)), wsum(std::move(wsum_)), bias(std::move(bias_)),
        outputs(outputs_), outliers(outliers_), act_max(act_max_) {
    const char* who = "Int8Weight";
    for (const auto* t : {&w, &wt, &scale, &wsum, &bias})
      TORCH_CHECK(t->defined() && t->device().is_cpu() && t->is_contiguous(), who,
                  ": w, wt, scale, wsum and bias must be contiguous CPU tensors (bias empty: none)");
    TORCH_CHECK(w.scalar_type() == at::kChar && wt.scalar_type() == at::kChar, who, ": w and wt must be int8");
    TORCH_CHECK(layout() > 0, who, ": w must be blocked (N' / 4, kp / 64, 4, 64) or in panels (N' / 16, kp / 4, 16, "
                "4); got ", w.sizes());
    TORCH_CHECK(padded() % 16 == 0 && kp() % 64 == 0 && padded() > 0, who, ": N' must be a multiple of 16 and kp of "
                "64; got N' = ", padded(), ", kp = ", kp());
    TORCH_CHECK(wt.dim() == 2 && wt.size(1) == padded() && wt.size(0) >= 1 && (wt.size(0) + 63) / 64 * 64 == kp(),
                who, ": wt must be (K, N') = (K, ", padded(), ") with K rounded up to 64 = ", kp(), "; got ",
                wt.sizes());
    TORCH_CHECK(scale.scalar_type() == at::kFloat && scale.dim() == 1 && scale.size(0) == padded(), who,
                ": scale must be (N',) float32, N' = ", padded());
    TORCH_CHECK(wsum.scalar_type() == at::kInt && wsum.dim() == 1 && wsum.size(0) == padded(), who,
                ": wsum must be (N',) int32, N' = ", padded());
    TORCH_CHECK(bias.numel() == 0 || (bias.scalar_type() == at::kFloat && bias.dim() == 1 && bias.size(0) == padded()),
                who, ": bias must be (N',) float32 or empty, N' = ", padded());
    TORCH_CHECK(outputs >= 1 && outputs <= padded() && padded() - outputs < 16, who, ": outputs must be in (N' - 16, "
                "N'] = (", padded() - 16, ", ", padded(), "]; got ", outputs);
    TORCH_CHECK(outliers >= 0 && outliers <= std::min<int64_t>(inputs(), attnkit_linear::kMaxOutliers), who,
                ": outliers must be in [0, min(K, ", attnkit_linear::kMaxOutliers, ")]; got ", outliers);
    TORCH_CHECK(act_max >= 1 && act_max <= 127, who, ": act_max must be in [1, 127]; got ", act_max);
  }

  // 1 blocked, 2 panels, 0 neither
  int layout() const {
    if (w.dim() != 4) return 0;
    if (w.size(2) == 4 && w.size(3) == 64) return 1;
    return w.size(2) == 16 && w.size(3) == 4 ? 2 : 0;
  }
  bool panels() const { return layout() == 2; }
  int64_t padded() const { return panels() ? 16 * w.size(0) : 4 * w.size(0); }
  int64_t kp() const { return panels() ? 4 * w.size(1) : 64 * w.size(1); }
  int64_t inputs() const { return wt.size(0); }
};

namespace int8_detail {

using namespace attnkit_linear;

// The integer sums of rows a (and their second plane b) against W (panels or blocked), outputs [n0, n1).
template <typename D>
inline void sums(bool panels, const int8_t* a, const int8_t* b, const int8_t* w, int64_t m, int64_t kp, int64_t n0,
                 int64_t n1, int32_t* out) {
  if (panels)
    panel_sums_i8<D>(a, b, w, m, kp, n0, n1, out);
  else
    blocked_sums_i8<D>(a, b, w, m, kp, n0, n1, out);
}

// The same with DotFast's instructions (AVX512-VNNI, NEON's sdot): everything inlined under their target.
ATTNKIT_FAST_DOT __attribute__((flatten)) inline void sums_fast(bool panels, const int8_t* a, const int8_t* b,
                                                                  const int8_t* w, int64_t m, int64_t kp, int64_t n0,
                                                                  int64_t n1, int32_t* out) {
  sums<attnkit_simd::DotFast>(panels, a, b, w, m, kp, n0, n1, out);
}

inline bool fast_dot() {
  static const bool has = attnkit_simd::kFastDot && attnkit_simd::cpu_has_fast_dot();
  return has;
}

// The second plane the Dot that runs here multiplies (vec_int8.h).
inline int plane() { return fast_dot() ? attnkit_simd::DotFast::kPlane : attnkit_simd::Dot::kPlane; }

constexpr int64_t kRowChunk = 64;  // rows of x whose sums a thread keeps before their epilogue

// Quantised rows of x (float32, m x k) for w: a and its second plane (m x kp int8 each), s, shift (m), cols
// (m x outliers), idx (outliers).
struct Rows {
  std::unique_ptr<int8_t[]> a;
  std::unique_ptr<float[]> s, shift, cols;
  int64_t idx[kMaxOutliers];
  int count;

  Rows(const float* x, int64_t m, int64_t k, const Int8Weight& w)
      : a(new int8_t[2 * m * w.kp()]), s(new float[m]), shift(new float[m]), cols(new float[m * w.outliers + 1]),
        count(static_cast<int>(w.outliers)) {
    if (count > 0) {
      const auto amax = attnkit_simd::scratch_floats(static_cast<size_t>(k));
      at::parallel_for(0, (k + 15) / 16, std::max<int64_t>(1, 2048 / m), [&](int64_t c0, int64_t c1) {
        column_amax(x, m, k, 16 * c0, std::min(16 * c1, k), amax.get());
      });
      top_columns(amax.get(), k, count, idx);
    }
    const int64_t kp = w.kp();
    at::parallel_for(0, m, std::max<int64_t>(1, 32768 / k), [&](int64_t r0, int64_t r1) {
      quantize_rows(x, k, kp, idx, count, static_cast<float>(w.act_max), plane(), r0, r1, a.get(), a.get() + m * kp,
                    s.get(), shift.get(), cols.get());
    });
  }
};

// out (m, n) (or float sums for a LayerNorm: the same buffer) = the epilogue of x's rows against w.
inline void products(const Rows& q, const Int8Weight& w, const float* res, float* out, int64_t m, int64_t act) {
  const int64_t n = w.outputs, kp = w.kp(), blocks = w.padded() / 16;
  const bool fast = fast_dot(), panels = w.panels();
  Int8Epilogue e{q.s.get(), q.shift.get(), q.cols.get(), q.idx, q.count, w.wt.data_ptr<int8_t>(), w.padded(),
                 w.scale.data_ptr<float>(), w.wsum.data_ptr<int32_t>(), fast && attnkit_simd::DotFast::kOffset,
                 w.bias.numel() ? w.bias.data_ptr<float>() : nullptr};
  const int8_t* wp = w.w.data_ptr<int8_t>();
  const int64_t grain = std::max<int64_t>(1, 262144 / std::max<int64_t>(16 * kp * std::min(m, kRowChunk), 1));
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t width = (b1 - b0) * 16, c0 = b0 * 16, c1 = std::min(b1 * 16, n);
    const auto s = std::unique_ptr<int32_t[]>(new int32_t[std::min(m, kRowChunk) * width]);
    for (int64_t r0 = 0; r0 < m; r0 += kRowChunk) {
      const int64_t rows = std::min(kRowChunk, m - r0);
      const int8_t *a = q.a.get() + r0 * kp, *b = q.a.get() + (m + r0) * kp;
      if (fast)
        sums_fast(panels, a, b, wp, rows, kp, c0, c0 + width, s.get());
      else
        sums<attnkit_simd::Dot>(panels, a, b, wp, rows, kp, c0, c0 + width, s.get());
      Int8Epilogue er = e;
      er.s += r0, er.shift += r0, er.cols += r0 * q.count;
      epilogue_i8<float>(s.get(), width, er, res ? res + r0 * n : nullptr, out + r0 * n, rows, n, c0, c1, act);
    }
  });
}

}  // namespace int8_detail

// x (M, K) float32, contiguous, on the CPU -> (M, N) float32: act(x W^T + b) + residual (M, N); with ln_weight and
// ln_bias (N,) (act 0, a residual, N a multiple of 16): LN(residual + x W^T + b) ln_weight + ln_bias; with
// x_norm_weight and x_norm_bias (K,) (K a multiple of 16): x is first LN(x) x_norm_weight + x_norm_bias (pre-LN).
inline at::Tensor int8_linear(const at::Tensor& x, const Int8Weight& w, const c10::optional<at::Tensor>& residual,
                              int64_t act, const c10::optional<at::Tensor>& ln_weight,
                              const c10::optional<at::Tensor>& ln_bias, double eps,
                              const c10::optional<at::Tensor>& x_norm_weight,
                              const c10::optional<at::Tensor>& x_norm_bias) {
  const char* who = "int8_linear";
  const int64_t n = w.outputs, k = w.inputs();
  TORCH_CHECK(x.defined() && x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 &&
                  x.is_contiguous(), who, ": x must be (M, K) float32, contiguous, on the CPU");
  TORCH_CHECK(x.size(1) == k, who, ": x has ", x.size(1), " features, the weight K = ", k);
  check_sizes(x, who, "x");
  const bool has_r = residual.has_value() && residual->defined();
  TORCH_CHECK(!has_r || (residual->device().is_cpu() && residual->scalar_type() == at::kFloat &&
                         residual->dim() == 2 && residual->size(0) == x.size(0) && residual->size(1) == n &&
                         residual->is_contiguous()),
              who, ": residual must be (M, N) = (", x.size(0), ", ", n, ") float32, contiguous, on the CPU");
  TORCH_CHECK(act >= 0 && act <= 4, who, ": act must be 0 (none), 1 (ReLU), 2 (SiLU), 3 (GELU) or 4 (GELU tanh)");
  const auto param = [](const c10::optional<at::Tensor>& t) { return t.has_value() && t->defined(); };
  const auto check_param = [&](const c10::optional<at::Tensor>& t, int64_t size, const char* what) {
    TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == at::kFloat && t->dim() == 1 && t->size(0) == size &&
                    t->is_contiguous(), who, ": ", what, " must be (", size, ",) float32, contiguous, on the CPU");
  };
  const bool norm = param(ln_weight), x_norm = param(x_norm_weight);
  TORCH_CHECK(norm == param(ln_bias) && x_norm == param(x_norm_bias), who,
              ": give ln_weight with ln_bias, and x_norm_weight with x_norm_bias");
  if (norm) {
    check_param(ln_weight, n, "ln_weight"), check_param(ln_bias, n, "ln_bias");
    TORCH_CHECK(act == 0 && has_r && n % 16 == 0, who, ": a LayerNorm follows a residual sum only (act 0, a "
                "residual, N a multiple of 16)");
  }
  if (x_norm) {
    check_param(x_norm_weight, k, "x_norm_weight"), check_param(x_norm_bias, k, "x_norm_bias");
    TORCH_CHECK(k % 16 == 0, who, ": x_norm_weight needs K a multiple of 16; got ", k);
  }
  const int64_t m = x.size(0);
  auto out = at::empty({m, n}, x.options());
  if (m == 0) return out;
  const float* xp = x.data_ptr<float>();
  const auto xf = attnkit_simd::scratch_floats(x_norm ? static_cast<size_t>(m * k) : 0);
  if (x_norm) {
    attnkit_linear::widen_rows<float>(xp, m, k, x_norm_weight->data_ptr<float>(), x_norm_bias->data_ptr<float>(),
                                      static_cast<float>(eps), xf.get());
    xp = xf.get();
  }
  const int8_detail::Rows q(xp, m, k, w);
  float* op = out.data_ptr<float>();
  int8_detail::products(q, w, has_r ? residual->data_ptr<float>() : nullptr, op, m, act);
  if (norm) {
    const float* g = ln_weight->data_ptr<float>();
    const float* h = ln_bias->data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {  // in place: each element read before it is written
      float mean, rstd;
      attnkit_linear::row_mean_rstd(op + i * n, n, static_cast<float>(eps), mean, rstd);
      attnkit_norm::row_out<float>(op + i * n, g, h, op + i * n, n, mean, rstd);
    }
  }
  return out;
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
