// act(x W^T + b) + r for a few rows: the checked entry point of small_linear.h. Included once by module.cpp
// (and by the inference layer's compositions.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <type_traits>

#include "add_norm.h"
#include "vec.h"
#include "panel_linear.h"
#include "small_linear.h"

// x (M, K), weight (N, K), blocked (N / 4, K / 16, 4, 16) (small_linear.h) or in panels (panel_linear.h: for
// more than a few rows; float32 (N / 16, K, 16), bfloat16 (N / 16, K / 2, 16, 2) on a CPU with AVX512-BF16),
// bias (N,) or undefined, residual (M, N) or undefined: contiguous, all float32 or all bfloat16, on the CPU;
// K and N multiples of 16; act 0 none, 1 ReLU, 2 SiLU, 3 GELU (erf), 4 GELU (tanh).
namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

// A packed weight's layout, from its dtype and shape: 1 blocked (N / 4, K / 16, 4, 16), 2 panels (float32
// (N / 16, K, 16), bfloat16 (N / 16, K / 2, 16, 2)), 0 neither (nn.Linear's (N, K) is the caller's to tell).
inline int packed_layout(const at::Tensor& w) {
  if (w.dim() == 4 && w.size(2) == 4 && w.size(3) == 16) return 1;
  const bool f32 = w.scalar_type() == at::kFloat;
  if (f32 ? (w.dim() == 3 && w.size(2) == 16) : (w.dim() == 4 && w.size(2) == 16 && w.size(3) == 2)) return 2;
  return 0;
}
// A packed weight's outputs (N) and inputs (K).
inline int64_t packed_outputs(const at::Tensor& w) {
  const int l = packed_layout(w);
  return l == 1 ? 4 * w.size(0) : l == 2 ? 16 * w.size(0) : 0;
}
inline int64_t packed_inputs(const at::Tensor& w) {
  const int l = packed_layout(w);
  return l == 1 ? 16 * w.size(1) : l == 2 ? w.size(1) * (w.dim() == 4 ? 2 : 1) : 0;
}

// With ln_weight and ln_bias (N,) (act 0, a residual, float32 sums): LN(residual + x W^T + b) * ln_weight + ln_bias.
// With x_norm_weight and x_norm_bias (K,): x is first LN(x) * x_norm_weight + x_norm_bias, in float32 (pre-LN).
inline at::Tensor small_linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias,
                               const c10::optional<at::Tensor>& residual, int64_t act,
                               const c10::optional<at::Tensor>& ln_weight, const c10::optional<at::Tensor>& ln_bias,
                               double eps, const c10::optional<at::Tensor>& x_norm_weight = c10::nullopt,
                               const c10::optional<at::Tensor>& x_norm_bias = c10::nullopt) {
  const char* who = "small_linear";
  const bool has_b = bias.has_value() && bias->defined(), has_r = residual.has_value() && residual->defined();
  TORCH_CHECK(x.defined() && weight.defined() && x.device().is_cpu() && weight.device().is_cpu() &&
                  (!has_b || bias->device().is_cpu()) && (!has_r || residual->device().is_cpu()),
              who, ": x, weight, bias and residual must be CPU tensors");
  const auto dt = x.scalar_type();
  TORCH_CHECK((dt == at::kFloat || dt == at::kBFloat16) && weight.scalar_type() == dt &&
                  (!has_b || bias->scalar_type() == dt) && (!has_r || residual->scalar_type() == dt),
              who, ": x, weight, bias and residual must all be float32 or all bfloat16");
  const int layout = packed_layout(weight);
  const bool blocked = layout == 1, panels = layout == 2;
  TORCH_CHECK(x.dim() == 2 && (weight.dim() == 2 || layout > 0), who,
              ": x must be (M, K) and weight (N, K), blocked (N / 4, K / 16, 4, 16) or in panels (float32 "
              "(N / 16, K, 16), bfloat16 (N / 16, K / 2, 16, 2))");
  TORCH_CHECK(!panels || dt == at::kFloat || attnkit_simd::cpu_has_bf16(), who,
              ": bfloat16 panels need AVX512-BF16; use the blocked layout on this CPU");
  const int64_t m = x.size(0), k = x.size(1);
  const int64_t n = layout > 0 ? packed_outputs(weight) : weight.size(0);
  TORCH_CHECK((layout > 0 ? packed_inputs(weight) : weight.size(1)) == k, who, ": x and weight disagree on K");
  TORCH_CHECK(k % 16 == 0 && n % 16 == 0, who, ": K and N must be multiples of 16, got K=", k, ", N=", n);
  TORCH_CHECK(!has_b || (bias->dim() == 1 && bias->size(0) == n && bias->is_contiguous()), who,
              ": bias must be (N,) and contiguous");
  TORCH_CHECK(!has_r || (residual->dim() == 2 && residual->size(0) == m && residual->size(1) == n &&
                         residual->is_contiguous()), who, ": residual must be (M, N) and contiguous");
  TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), who, ": x and weight must be contiguous");
  TORCH_CHECK(act >= 0 && act <= 4, who, ": act must be 0 (none), 1 (ReLU), 2 (SiLU), 3 (GELU) or 4 (GELU tanh)");
  const bool norm = ln_weight.has_value() && ln_weight->defined();
  TORCH_CHECK(norm == (ln_bias.has_value() && ln_bias->defined()), who, ": give ln_weight and ln_bias together");
  if (norm) {
    for (const auto* t : {&*ln_weight, &*ln_bias})
      TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == dt && t->dim() == 1 && t->size(0) == n &&
                      t->is_contiguous(), who, ": ln_weight and ln_bias must be (N,), contiguous, x's dtype, CPU");
    TORCH_CHECK(act == 0 && has_r, who, ": a LayerNorm follows a residual sum only (act 0, with a residual)");
  }
  const bool x_norm = x_norm_weight.has_value() && x_norm_weight->defined();
  TORCH_CHECK(x_norm == (x_norm_bias.has_value() && x_norm_bias->defined()), who,
              ": give x_norm_weight and x_norm_bias together");
  if (x_norm)
    for (const auto* t : {&*x_norm_weight, &*x_norm_bias})
      TORCH_CHECK(t->device().is_cpu() && t->scalar_type() == dt && t->dim() == 1 && t->size(0) == k &&
                      t->is_contiguous(),
                  who, ": x_norm_weight and x_norm_bias must be (K,), contiguous, x's dtype, CPU");
  auto out = at::empty({m, n}, x.options());
  if (m == 0 || n == 0) return out;
  auto go = [&](auto tag) {
    using S = decltype(tag);
    const S* xp = reinterpret_cast<const S*>(x.data_ptr());
    // x widened once (normalised), unless bfloat16 panels take x as it is
    const bool widen = std::is_same<S, float>::value || !panels || x_norm;
    const auto xf = attnkit_simd::scratch_floats(widen ? static_cast<size_t>(m * k) : 0);
    const S* xg = x_norm ? reinterpret_cast<const S*>(x_norm_weight->data_ptr()) : nullptr;
    const S* xh = x_norm ? reinterpret_cast<const S*>(x_norm_bias->data_ptr()) : nullptr;
    if (widen) attnkit_linear::widen_rows<S>(xp, m, k, xg, xh, static_cast<float>(eps), xf.get());
    // the panels' rows: float32 x widened (normalised); bfloat16 x itself, or its norm rounded to bfloat16
    std::unique_ptr<uint16_t[]> xb;
    const S* xin = reinterpret_cast<const S*>(xf.get());
    if constexpr (!std::is_same<S, float>::value) {
      xin = xp;
      if (x_norm && panels) {
        xb.reset(new uint16_t[m * k]);
        attnkit_linear::narrow_rows(xf.get(), m, k, xb.get());
        xin = xb.get();
      }
    }
    const S* wp = reinterpret_cast<const S*>(weight.data_ptr());
    const S* bp = has_b ? reinterpret_cast<const S*>(bias->data_ptr()) : nullptr;
    const S* rp = has_r ? reinterpret_cast<const S*>(residual->data_ptr()) : nullptr;
    S* op = reinterpret_cast<S*>(out.data_ptr());
    // columns in blocks of 16: each thread takes whole blocks; a block is 16 rows of W (32 KB at K = 512
    // float32); with panels at least ~64K multiply-adds a thread (a dozen rows: a few panels)
    const int64_t blocks = n / 16;
    const int64_t grain = panels ? std::max<int64_t>(2, 65536 / std::max<int64_t>(16 * k * m, 1)) / 2 * 2
                                 : std::max<int64_t>(1, 4096 / std::max<int64_t>(k, 1));
    const auto y = attnkit_simd::scratch_floats(norm ? static_cast<size_t>(m * n) : 0);  // sums for the LayerNorm
    auto cols = [&](auto* dst) {
      using O = std::remove_pointer_t<decltype(dst)>;
      at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
        const auto sums = attnkit_simd::scratch_floats(static_cast<size_t>(m * (b1 - b0) * 16));
        if (panels) {
          attnkit_linear::panel_sums<S>(xin, wp, m, k, b0 * 16, b1 * 16, sums.get());
          attnkit_linear::epilogue<S, O>(sums.get(), bp, rp, dst, m, n, b0 * 16, b1 * 16, act);
        } else if (blocked) {
          attnkit_linear::small_linear_cols<S, O, true>(xf.get(), wp, bp, rp, dst, m, n, k, b0 * 16, b1 * 16, act,
                                                        sums.get());
        } else {
          attnkit_linear::small_linear_cols<S, O, false>(xf.get(), wp, bp, rp, dst, m, n, k, b0 * 16, b1 * 16, act,
                                                         sums.get());
        }
      });
    };
    if (!norm) {
      cols(op);
      return;
    }
    cols(y.get());
    const S* gp = reinterpret_cast<const S*>(ln_weight->data_ptr());
    const S* hp = reinterpret_cast<const S*>(ln_bias->data_ptr());
    for (int64_t i = 0; i < m; ++i) {  // a few rows: on this thread
      float mean, rstd;
      attnkit_linear::row_mean_rstd(y.get() + i * n, n, static_cast<float>(eps), mean, rstd);
      attnkit_norm::row_out<S>(y.get() + i * n, gp, hp, op + i * n, n, mean, rstd);
    }
  };
  if (dt == at::kFloat)
    go(float{});
  else
    go(uint16_t{});
  return out;
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
