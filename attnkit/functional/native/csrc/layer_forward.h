// One Transformer layer over every position of a few short rows, in one call: an encoder layer, or a
// non-autoregressive decoder layer (the same with cross-attention). The sequences that
// FusedEncoderLayer.forward (attnkit/pretrained/fast.py) and FastNAT.decode_parallel (fast_nat.py) run
// from Python, with no Python between their kernels. At a sentence (up to 32 rows) each kernel
// takes a few microseconds, and the dispatches around them cost as much again. Included once, by
// module.cpp, after linear_ops.h and attention_ops.h.
//
//   post-LN (norm_first false)                     pre-LN (norm_first true)
//   q, k, v = x W_qkv + b                          q, k, v = LN1(x) W_qkv + b
//   x = LN1(x + attend(q, k, v) W_o + b)           x = x + attend(q, k, v) W_o + b
//   [x = LN2(x + cross(x W_cq + b) W_co + b)]      [x = x + cross(LN2(x) W_cq + b) W_co + b]
//   x = LNf(x + act(x W_1 + b) W_2 + b)            x = x + act(LNf(x) W_1 + b) W_2 + b
//
// A pre-LN layer's norms run inside the linear kernels that follow them (as in decoder_step.h).
// Self-attention is unmasked apart from padding: position i of row b sees the first lengths[b] positions
// (lengths empty: all T). The bracketed cross-attention runs when w holds 18 tensors.
// x (B, T, d); w: W, b of qkv, self_out, [cross_q, cross_out,] ff1, ff2, W in one of small_linear's
// packed layouts (blocked, or panels: the faster from 5 rows on; out_features multiples of 16, no padding
// rows), then weight, bias of each norm (LN1, [LN2,] LNf);
// cross_keys, cross_values (B, H, S, dh), the last dim contiguous; cross_lengths: short_forward's key lengths.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace attnkit_ops {

// A packed weight's outputs and inputs: blocked (N / 4, K / 16, 4, 16) or panels (N / 16, K, 16); 0 for others.
inline int64_t packed_outputs(const at::Tensor& w) {
  if (w.dim() == 4 && w.size(2) == 4 && w.size(3) == 16) return 4 * w.size(0);
  return w.dim() == 3 && w.size(2) == 16 ? 16 * w.size(0) : 0;
}
inline int64_t packed_inputs(const at::Tensor& w) { return w.dim() == 4 ? 16 * w.size(1) : w.size(1); }

inline at::Tensor layer_forward(const at::Tensor& x, const std::vector<at::Tensor>& w, int64_t num_heads,
                                const at::Tensor& lengths, const c10::optional<at::Tensor>& cross_keys,
                                const c10::optional<at::Tensor>& cross_values, const at::Tensor& cross_lengths,
                                bool norm_first, int64_t act, double eps, double scale) {
  const char* who = "layer_forward";
  TORCH_CHECK(w.size() == 12 || w.size() == 18, who, ": `w` must hold 12 tensors (an encoder layer) or 18 (with "
              "cross-attention): W, b of each linear layer, then weight, bias of each norm; got ", w.size());
  for (const auto& p : w) TORCH_CHECK(p.defined(), who, ": every tensor of `w` must be defined");
  const bool cross = w.size() == 18;
  const int lin = cross ? 6 : 4, ff1 = 2 * (lin - 2), ff2 = ff1 + 2, norms = 2 * lin;
  TORCH_CHECK(x.defined() && x.dim() == 3 && x.is_contiguous(), who, ": `x` must be (B, T, d) and contiguous");
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  TORCH_CHECK(num_heads >= 1 && d % num_heads == 0, who, ": num_heads=", num_heads, " must divide d=", d);
  const int64_t h = num_heads, dh = d / h;
  for (int i = 0; i < norms; i += 2)
    TORCH_CHECK(packed_outputs(w[i]) > 0 && w[i + 1].dim() == 1 && packed_outputs(w[i]) == w[i + 1].size(0), who,
                ": weight ", i / 2, " must be blocked (N / 4, K / 16, 4, 16) or in panels (N / 16, K, 16), with a "
                "bias of N (no padding rows)");
  TORCH_CHECK(packed_outputs(w[0]) == 3 * d, who, ": the qkv weight must have 3d = ", 3 * d, " outputs");
  for (int i = 2; i < norms; i += 2)
    TORCH_CHECK(i == ff1 || packed_outputs(w[i]) == d, who, ": weight ", i / 2, " must have d = ", d, " outputs");
  TORCH_CHECK(packed_inputs(w[ff2]) == packed_outputs(w[ff1]), who, ": ff2's inputs must be ff1's outputs");
  const bool has_ck = cross_keys.has_value() && cross_keys->defined();
  const bool has_cv = cross_values.has_value() && cross_values->defined();
  TORCH_CHECK(has_ck == cross && has_cv == cross, who,
              ": give cross_keys and cross_values with 18 tensors (cross-attention) and neither with 12");
  if (cross)
    TORCH_CHECK(cross_keys->dim() == 4 && cross_keys->size(0) == b && cross_keys->size(1) == h &&
                    cross_keys->size(3) == dh, who, ": `cross_keys` must be (B, H, S, dh) = (", b, ", ", h,
                ", S, ", dh, "), got ", cross_keys->sizes());

  const c10::optional<at::Tensor> none;
  const at::Tensor no_offsets = at::empty({0}, x.options().dtype(at::kLong));
  const int64_t n = b * t;
  // act(y W^T + b) for linear l; pre-LN: of LayerNorm i of y, inside the same kernel
  const auto project = [&](const at::Tensor& y, int l, int i, int64_t a) {
    if (!norm_first) return small_linear(y, w[2 * l], w[2 * l + 1], none, a, none, none, eps);
    return small_linear(y, w[2 * l], w[2 * l + 1], none, a, none, none, eps, w[norms + 2 * i], w[norms + 2 * i + 1]);
  };
  // residual + y W^T + b; post-LN then LayerNorm i
  const auto residual = [&](const at::Tensor& y, int l, const at::Tensor& res, int i) {
    if (norm_first) return small_linear(y, w[2 * l], w[2 * l + 1], res, 0, none, none, eps);
    return small_linear(y, w[2 * l], w[2 * l + 1], res, 0, w[norms + 2 * i], w[norms + 2 * i + 1], eps);
  };
  const auto heads_merged = [&](const at::Tensor& o) {  // (B, H, T, dh) view of (B, T, H, dh) memory -> (B*T, d)
    return o.transpose(1, 2).reshape({n, d}).contiguous();
  };

  const at::Tensor flat = x.view({n, d});  // (B, T, d) -> (B*T, d)
  // self-attention: every position of a row sees the row's first lengths[b] positions
  auto qkv = project(flat, 0, 0, 0);
  qkv = qkv.view({b, t, 3, h, dh}).permute({2, 0, 3, 1, 4});  // (B*T, 3d) -> (3, B, H, T, dh)
  auto o = short_forward(qkv[0], qkv[1], qkv[2], lengths, no_offsets, scale);  // (B, H, T, dh)
  auto y = residual(heads_merged(o), 1, flat, 0);  // (B*T, d)

  if (cross) {  // every position of a row against its memory
    auto q = project(y, 2, 1, 0);
    q = q.view({b, t, h, dh}).transpose(1, 2);  // (B*T, d) -> (B, H, T, dh)
    o = short_forward(q, *cross_keys, *cross_values, cross_lengths, no_offsets, scale);  // (B, H, T, dh)
    y = residual(heads_merged(o), 3, y, 1);
  }

  // feed-forward, the activation inside ff1's kernel
  const int last = lin / 2 - 1;  // the feed-forward's norm: LN2 of an encoder layer, LN3 of a decoder layer
  auto f = project(y, ff1 / 2, last, act);
  return residual(f, ff2 / 2, y, last).view({b, t, d});
}

}  // namespace attnkit_ops
