// LayerNorm of a residual sum, LN(x + r), for inference: the checked entry point of add_norm.h.
// Included once, by module.cpp.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <vector>

#include "add_norm.h"
#include "vec.h"

// x, r (..., d) contiguous, weight and bias (d,), all float32 or all bfloat16 on the CPU; d a multiple of 16.
namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

inline at::Tensor add_norm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight, const at::Tensor& bias,
                    double eps) {
  for (const auto* t : {&x, &r, &weight, &bias})
    TORCH_CHECK(t->defined() && t->device().is_cpu(), "add_norm: x, r, weight and bias must be CPU tensors");
  const auto dt = x.scalar_type();
  TORCH_CHECK(dt == at::kFloat || dt == at::kBFloat16, "add_norm: x must be float32 or bfloat16");
  TORCH_CHECK(r.scalar_type() == dt && weight.scalar_type() == dt && bias.scalar_type() == dt,
              "add_norm: x, r, weight and bias must share one dtype");
  TORCH_CHECK(x.dim() >= 1 && r.sizes() == x.sizes(), "add_norm: r must have the shape of x");
  const int64_t d = x.size(-1);
  TORCH_CHECK(d % 16 == 0 && weight.dim() == 1 && weight.size(0) == d && bias.dim() == 1 && bias.size(0) == d,
              "add_norm: the last dimension must be a multiple of 16, weight and bias (d,)");
  TORCH_CHECK(x.is_contiguous() && r.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
              "add_norm: tensors must be contiguous");
  auto out = at::empty_like(x);
  const int64_t rows = d ? x.numel() / d : 0;
  if (rows == 0) return out;
  auto go = [&](auto tag) {
    using S = decltype(tag);
    const S *xp = reinterpret_cast<const S*>(x.data_ptr()), *rp = reinterpret_cast<const S*>(r.data_ptr()),
            *wp = reinterpret_cast<const S*>(weight.data_ptr()), *bp = reinterpret_cast<const S*>(bias.data_ptr());
    S* op = reinterpret_cast<S*>(out.data_ptr());
    const bool native_bf16 = attnkit_simd::cpu_has_bf16();
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      std::vector<float> y(d);
      attnkit_norm::add_norm_rows<S>(xp, rp, wp, bp, op, begin, end, d, static_cast<float>(eps), y.data(), native_bf16);
    });
  };
  if (dt == at::kFloat)
    go(float{});
  else
    go(uint16_t{});
  return out;
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
