// One decoder layer for one new position of every row (a decoding step), in one call: the sequence that
// FastSeq2Seq._layer runs from Python (attnkit/pretrained/fast_seq2seq.py), with no Python between its
// kernels. At batch 1 a step's arithmetic is a pass over the weights; the Python sequence's dispatches
// around its six matrix-vector products and two attention kernels (about 15 per layer) cost about 5% of
// a Transformer-base step. A pre-LN layer's norms run inside the linear kernels that follow them
// (small_linear's x_norm_weight, x_norm_bias: the normalised row stays float32). Included once, by
// module.cpp, after linear_ops.h and attention_ops.h.
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

  const c10::optional<at::Tensor> none;
  // act(y W^T + b) for linear lin; pre-LN: of LayerNorm i (0, 1, 2) of y, inside the same kernel
  const auto project = [&](const at::Tensor& y, int lin, int i, int64_t a) {
    if (!norm_first) return small_linear(y, w[2 * lin], w[2 * lin + 1], none, a, none, none, eps);
    return small_linear(y, w[2 * lin], w[2 * lin + 1], none, a, none, none, eps, w[12 + 2 * i], w[13 + 2 * i]);
  };
  // out = residual + y W^T + b, post-LN then LayerNorm i
  const auto residual = [&](const at::Tensor& y, int lin, const at::Tensor& res, int i) {
    if (norm_first) return small_linear(y, w[2 * lin], w[2 * lin + 1], res, 0, none, none, eps);
    return small_linear(y, w[2 * lin], w[2 * lin + 1], res, 0, w[12 + 2 * i], w[13 + 2 * i], eps);
  };
  const at::Tensor no_lengths = at::empty({0}, keys.options().dtype(at::kLong));

  // self-attention over the cache, this position appended
  auto qkv = project(x, 0, 0, 0).view({b, 3, h, dh});
  keys.select(0, t).copy_(qkv.select(1, 1));
  values.select(0, t).copy_(qkv.select(1, 2));
  auto k = keys.narrow(0, 0, t + 1).permute({1, 2, 0, 3});  // (B, H, t+1, dh)
  auto v = values.narrow(0, 0, t + 1).permute({1, 2, 0, 3});
  auto o = short_forward(qkv.select(1, 0).unsqueeze(2), k, v, no_lengths, no_lengths, scale);  // (B, H, 1, dh)
  auto y = residual(o.reshape({b, d}).contiguous(), 1, x, 0);  // (B, d)

  // cross-attention: a sentence's beams are the queries of its memory
  auto q = project(y, 2, 1, 0);
  q = q.view({b / group, group, h, dh}).transpose(1, 2);  // (B / g, H, g, dh)
  o = short_forward(q, cross_keys, cross_values, cross_lengths, no_lengths, scale);  // (B / g, H, g, dh)
  y = residual(o.transpose(1, 2).reshape({b, d}).contiguous(), 3, y, 1);

  // feed-forward, the activation inside ff1's kernel
  auto f = project(y, 4, 2, act);
  return residual(f, 5, y, 2);
}

}  // namespace attnkit_ops
