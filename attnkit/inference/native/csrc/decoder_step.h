// One decoder layer for one new position of every row (a decoding step), in one call: the sequence that
// FastSeq2Seq._layer runs from Python (attnkit/pretrained/fast_seq2seq.py), its reference. At batch 1 a
// step's arithmetic is a pass over the weights; dispatching its six matrix-vector products and two
// attention kernels one by one (a thread team each) cost about a fifth of a small model's step. It runs
// in layer_forward.h's region (t = 1 position per row, the K, V cache written in place, a sentence's
// `group` beams the queries of its memory). Included once, by module.cpp, after layer_forward.h.
//
//   post-LN (norm_first false)                     pre-LN (norm_first true)
//   q, k, v = x W_qkv + b                          q, k, v = LN1(x) W_qkv + b
//   keys[t], values[t] = k, v                      (same)
//   x = LN1(x + attend(q, keys[:t+1]) W_o + b)     x = x + attend(q, keys[:t+1]) W_o + b
//   x = LN2(x + cross(x W_cq + b) W_co + b)        x = x + cross(LN2(x) W_cq + b) W_co + b
//   x = LN3(x + act(x W_1 + b) W_2 + b)            x = x + act(LN3(x) W_1 + b) W_2 + b
//
// x (B, d); weights in small_linear's blocked layout, out_features multiples of 16 (no padding rows);
// keys, values (capacity, B, H, dh) time-major; cross_keys, cross_values (B / group, H, S, dh): a
// sentence's `group` beams share its memory; cross_lengths: short_forward's key lengths (empty: none).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace attnkit_ops {

inline at::Tensor decoder_layer_step(const at::Tensor& x, const std::vector<at::Tensor>& w, const at::Tensor& keys,
                                     const at::Tensor& values, int64_t t, const at::Tensor& cross_keys,
                                     const at::Tensor& cross_values, const at::Tensor& cross_lengths, int64_t group,
                                     bool norm_first, int64_t act, double eps, double scale) {
  const char* who = "decoder_layer_step";
  TORCH_CHECK(w.size() == 18, who, ": `w` must hold 18 tensors (W, b of qkv, self_out, cross_q, cross_out, ff1, "
              "ff2, then weight, bias of the three norms), got ", w.size());
  for (const auto& p : w) TORCH_CHECK(p.defined(), who, ": every tensor of `w` must be defined");
  TORCH_CHECK(x.defined() && x.dim() == 2 && x.is_contiguous(), who, ": `x` must be (B, d) and contiguous");
  TORCH_CHECK(keys.defined() && values.defined() && keys.dim() == 4 && values.sizes() == keys.sizes() &&
                  keys.is_contiguous() && values.is_contiguous(),
              who, ": `keys` and `values` must be (capacity, B, H, dh), equal shapes, contiguous");
  const int64_t b = x.size(0), d = x.size(1), h = keys.size(2), dh = keys.size(3);
  TORCH_CHECK(keys.size(1) == b && h * dh == d, who, ": `keys` (", keys.sizes(), ") does not fit x (", x.sizes(), ")");
  TORCH_CHECK(t >= 0 && t < keys.size(0), who, ": position t=", t, " outside the cache's capacity ", keys.size(0));
  TORCH_CHECK(group >= 1 && b % group == 0, who, ": `group` must divide the batch ", b, ", got ", group);
  TORCH_CHECK(cross_keys.defined() && cross_values.defined() && cross_keys.dim() == 4 &&
                  cross_keys.size(0) == b / group && cross_keys.size(1) == h && cross_keys.size(3) == dh,
              who, ": `cross_keys` must be (B / group, H, S, dh) = (", b / group, ", ", h, ", S, ", dh, ")");
  for (int i = 0; i < 12; i += 2)
    TORCH_CHECK(w[i].dim() == 4 && w[i + 1].dim() == 1 && 4 * w[i].size(0) == w[i + 1].size(0), who,
                ": weight ", i / 2, " must be blocked (N / 4, K / 16, 4, 16) with a bias of N (no padding rows)");
  TORCH_CHECK(4 * w[0].size(0) == 3 * d, who, ": the qkv weight must have 3d = ", 3 * d, " outputs");
  for (int i : {2, 4, 6, 10})
    TORCH_CHECK(4 * w[i].size(0) == d, who, ": weight ", i / 2, " must have d = ", d, " outputs");
  TORCH_CHECK(w[10].size(1) * 16 == 4 * w[8].size(0), who, ": ff2's inputs must be ff1's outputs");

  const auto dt = x.scalar_type();
  TORCH_CHECK(x.device().is_cpu() && (dt == at::kFloat || (dt == at::kBFloat16 && attnkit_simd::cpu_has_bf16())),
              who, ": `x` must be float32, or bfloat16 on a CPU with AVX512-BF16, on the CPU");
  TORCH_CHECK(keys.device().is_cpu() && values.device().is_cpu() && keys.scalar_type() == dt &&
                  values.scalar_type() == dt, who, ": `keys` and `values` must be x's dtype, on the CPU");
  check_sizes(x, who, "x");
  check_sizes(keys, who, "keys");
  TORCH_CHECK(dh % (dt == at::kFloat ? 16 : 32) == 0, who, ": the head size ", dh,
              " must be a multiple of 16 (bfloat16: 32)");
  for (int i = 0; i < 12; i += 2) {
    TORCH_CHECK(w[i].device().is_cpu() && w[i].scalar_type() == dt && w[i].is_contiguous(), who, ": weight ",
                i / 2, " must be contiguous, x's dtype, on the CPU");
    layer_detail::check_param(w[i + 1], dt, 4 * w[i].size(0), who, i + 1);
    TORCH_CHECK(w[i].size(0) % 4 == 0, who, ": weight ", i / 2, " must have a multiple of 16 outputs");
    TORCH_CHECK(w[i].size(1) * 16 == (i == 10 ? 4 * w[8].size(0) : d), who, ": weight ", i / 2, " must have ",
                i == 10 ? "ff1's outputs" : "d", " inputs");
  }
  for (int i = 12; i < 18; ++i) layer_detail::check_param(w[i], dt, d, who, i);
  TORCH_CHECK(act >= 0 && act <= 4, who, ": act must be 0 (none), 1 (ReLU), 2 (SiLU), 3 (GELU) or 4 (GELU tanh)");
  layer_detail::check_memory(cross_keys, b / group, h, dh, dt, who, "cross_keys");
  layer_detail::check_memory(cross_values, b / group, h, dh, dt, who, "cross_values");
  TORCH_CHECK(cross_values.size(2) == cross_keys.size(2), who, ": cross_keys and cross_values must have the same S");
  const int64_t* cross_len = lengths_ptr(cross_lengths, b / group, who);
  return layer_detail::run(x, w, b, 1, h, true, norm_first, act, eps, scale, nullptr, &cross_keys, &cross_values,
                           cross_len, group, &keys, &values, t);
}

}  // namespace attnkit_ops
