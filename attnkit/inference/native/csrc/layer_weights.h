// A Transformer layer's weights as the native compositions take them: a struct with named fields, made from a
// layer of the model's weight spec (attnkit/inference/native/__init__.py) and checked once, when it is made.
// The compositions (layer_forward.h, decoder_step.h, nat_first_pass.h) then check only what a call brings (its
// rows, lengths, keys and values) against it. Included once, by compositions.cpp, after the kernels' entry
// points (linear_ops.h, attention_ops.h, int8_ops.h).
//
// LayerWeights: each linear layer a pair (W in one of small_linear's packed layouts, b) or, float32 layers only,
// an Int8Weight (int8_ops.h: W int8 in one of int8_linear's layouts, its scales, bias), each norm a pair
// (weight, bias): qkv (3d outputs), self_out, [cross_q, cross_out: a decoder layer,] ff1, ff2 (its inputs ff1's
// outputs); self_norm, [cross_norm,] ff_norm; out_features multiples of 16 (no padding rows); and the layer's
// settings: num_heads, norm_first (pre-LN), act (0 none, 1 ReLU, 2 SiLU, 3 GELU, 4 GELU tanh), the norms' eps,
// attention's scale. LayerStack: layers of one kind and the same settings, run in one call.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

using TensorPair = std::tuple<at::Tensor, at::Tensor>;
using LinearArg = std::variant<TensorPair, Int8Weight>;  // a linear layer: (W, b) in float, or int8
using Int8Linears = std::vector<std::optional<Int8Weight>>;  // per linear layer: its int8 weight, or none (float)

namespace layer_detail {

inline void check_param(const at::Tensor& p, at::ScalarType dt, int64_t size, const char* who, int i) {
  TORCH_CHECK(p.device().is_cpu() && p.scalar_type() == dt && p.dim() == 1 && p.size(0) == size &&
                  p.is_contiguous(), who, ": tensor ", i, " of the layer must be (", size, ",), contiguous, the "
              "weights' dtype, on the CPU");
}

inline void check_memory(const at::Tensor& m, int64_t b, int64_t h, int64_t dh, at::ScalarType dt, const char* who,
                         const char* name) {
  TORCH_CHECK(m.defined() && m.device().is_cpu() && m.scalar_type() == dt && m.dim() == 4 && m.size(0) == b &&
                  m.size(1) == h && m.size(3) == dh && m.stride(3) == 1, who, ": `", name, "` must be (B, H, S, dh) = (",
              b, ", ", h, ", S, ", dh, "), x's dtype, on the CPU, the last dim contiguous; got ",
              m.defined() ? m.sizes() : at::IntArrayRef{});
  check_sizes(m, who, name);
}

// A linear layer's outputs and inputs (its own K) and layout (1 blocked, 2 panels), float or int8.
inline int64_t outputs_of(const std::vector<at::Tensor>& w, const Int8Linears& q8, size_t l) {
  return q8[l] ? q8[l]->padded() : packed_outputs(w[2 * l]);
}
inline int64_t inputs_of(const std::vector<at::Tensor>& w, const Int8Linears& q8, size_t l) {
  return q8[l] ? q8[l]->inputs() : packed_inputs(w[2 * l]);
}
inline int layout_of(const std::vector<at::Tensor>& w, const Int8Linears& q8, size_t l) {
  return q8[l] ? q8[l]->layout() : packed_layout(w[2 * l]);
}

// The checks of one layer's tensors w (the kernels' order: W, b of each linear layer, then weight, bias of each
// norm; q8 the int8 ones) against dtype dt and d features; `which` names the layer in a stack (-1: alone).
// Returns whether the layer has cross-attention (18 tensors).
inline bool check_layer(const std::vector<at::Tensor>& w, const Int8Linears& q8, at::ScalarType dt, int64_t d,
                        const char* who, int64_t which) {
  const std::string at_layer = which < 0 ? std::string() : " (layer " + std::to_string(which) + ")";
  TORCH_CHECK(w.size() == 12 || w.size() == 18, who, at_layer, ": a layer holds 12 tensors (an encoder layer) or 18 "
              "(with cross-attention); got ", w.size());
  for (const auto& p : w) TORCH_CHECK(p.defined(), who, at_layer, ": every tensor of the layer must be defined");
  const bool cross = w.size() == 18;
  const size_t lin = cross ? 6 : 4, ff1 = lin - 2, ff2 = lin - 1, norms = 2 * lin;
  TORCH_CHECK(q8.size() == lin, who, at_layer, ": one entry per linear layer in q8");
  for (size_t l = 0; l < lin; ++l) {
    const at::Tensor& wl = w[2 * l];
    if (q8[l]) {
      TORCH_CHECK(dt == at::kFloat, who, at_layer, ": int8 weights need float32 activations");
      TORCH_CHECK(q8[l]->outputs == q8[l]->padded() && q8[l]->bias.numel() > 0, who, at_layer, ": int8 weight ", l,
                  " must have a multiple of 16 outputs and a bias");
    } else {
      TORCH_CHECK(packed_outputs(wl) > 0 && wl.device().is_cpu() && wl.scalar_type() == dt && wl.is_contiguous(),
                  who, at_layer, ": weight ", l, " must be blocked (N / 4, K / 16, 4, 16) or in panels (float32 "
                  "(N / 16, K, 16), bfloat16 (N / 16, K / 2, 16, 2)), contiguous, the weights' dtype, on the CPU");
      TORCH_CHECK(packed_outputs(wl) % 16 == 0, who, at_layer, ": weight ", l, " must have a multiple of 16 outputs");
    }
    check_param(w[2 * l + 1], dt, outputs_of(w, q8, l), who, 2 * l + 1);
  }
  TORCH_CHECK(outputs_of(w, q8, 0) == 3 * d, who, at_layer, ": the qkv weight must have 3d = ", 3 * d, " outputs");
  const int64_t dff = outputs_of(w, q8, ff1);
  for (size_t l = 0; l < lin; ++l) {
    TORCH_CHECK(l == 0 || l == ff1 || outputs_of(w, q8, l) == d, who, at_layer, ": weight ", l, " must have d = ", d,
                " outputs");
    TORCH_CHECK(inputs_of(w, q8, l) == (l == ff2 ? dff : d), who, at_layer, ": weight ", l, " must have ",
                l == ff2 ? "ff1's outputs" : "d", " inputs");
  }
  for (size_t i = norms; i < w.size(); ++i) check_param(w[i], dt, d, who, static_cast<int>(i));
  return cross;
}

}  // namespace layer_detail

struct LayerWeights {
  std::vector<at::Tensor> w;  // the kernels' order: W, b of each linear layer, then weight, bias of each norm
  Int8Linears q8;             // per linear layer, in that order: its int8 weight (W, b in w too), or none
  at::ScalarType dtype;
  int64_t d, num_heads, act;
  bool norm_first, cross, blocked;  // blocked: every W in small_linear's blocked layout (a decoding step's)
  double eps, scale;

  LayerWeights(const LinearArg& qkv, const LinearArg& self_out, const LinearArg& ff1, const LinearArg& ff2,
               const TensorPair& self_norm, const TensorPair& ff_norm, const std::optional<LinearArg>& cross_q,
               const std::optional<LinearArg>& cross_out, const std::optional<TensorPair>& cross_norm,
               int64_t num_heads_, bool norm_first_, int64_t act_, double eps_, double scale_)
      : num_heads(num_heads_), act(act_), norm_first(norm_first_), eps(eps_), scale(scale_) {
    const char* who = "LayerWeights";
    const bool has = cross_q.has_value();
    TORCH_CHECK(cross_out.has_value() == has && cross_norm.has_value() == has, who,
                ": give cross_q, cross_out and cross_norm together (a decoder layer) or none (an encoder layer)");
    const auto add = [this](const TensorPair& p) {
      w.push_back(std::get<0>(p));
      w.push_back(std::get<1>(p));
    };
    const auto linear = [&](const LinearArg& a) {
      if (const auto* p = std::get_if<TensorPair>(&a)) {
        add(*p);
        q8.emplace_back();
      } else {
        const Int8Weight& iw = std::get<Int8Weight>(a);
        add({iw.w, iw.bias});
        q8.emplace_back(iw);
      }
    };
    for (const LinearArg* p : {&qkv, &self_out}) linear(*p);
    if (has) linear(*cross_q), linear(*cross_out);
    for (const LinearArg* p : {&ff1, &ff2}) linear(*p);
    add(self_norm);
    if (has) add(*cross_norm);
    add(ff_norm);
    for (const auto& p : w) TORCH_CHECK(p.defined(), who, ": every tensor of the layer must be defined");
    dtype = std::get<0>(self_norm).scalar_type();  // the activations' (int8 weights: float32)
    TORCH_CHECK(dtype == at::kFloat || (dtype == at::kBFloat16 && attnkit_simd::cpu_has_bf16()), who,
                ": the weights must be float32, or bfloat16 on a CPU with AVX512-BF16");
    d = layer_detail::outputs_of(w, q8, 0) / 3;
    cross = layer_detail::check_layer(w, q8, dtype, d, who, -1);
    TORCH_CHECK(num_heads >= 1 && d % num_heads == 0, who, ": num_heads=", num_heads, " must divide d=", d);
    TORCH_CHECK((d / num_heads) % (dtype == at::kFloat ? 16 : 32) == 0, who, ": the head size d / num_heads = ",
                d / num_heads, " must be a multiple of 16 (bfloat16: 32)");
    TORCH_CHECK(act >= 0 && act <= 4, who, ": act must be 0 (none), 1 (ReLU), 2 (SiLU), 3 (GELU) or 4 (GELU tanh)");
    blocked = true;
    for (size_t l = 0; l < q8.size(); ++l) blocked = blocked && layer_detail::layout_of(w, q8, l) == 1;
  }

  // x (B, T, d) of this layer: contiguous, on the CPU, the weights' dtype
  void check_rows(const at::Tensor& x, int64_t dims, const char* who) const {
    TORCH_CHECK(x.defined() && x.device().is_cpu() && x.dim() == dims && x.is_contiguous(), who, ": `x` must be ",
                dims == 3 ? "(B, T, d)" : "(B, d)", ", contiguous, on the CPU");
    TORCH_CHECK(x.scalar_type() == dtype, who, ": `x` must be the weights' dtype (", dtype, "), got ",
                x.scalar_type());
    check_sizes(x, who, "x");
    TORCH_CHECK(x.size(-1) == d, who, ": `x` has ", x.size(-1), " features, the layer d = ", d);
  }

  bool same_settings(const LayerWeights& o) const {
    return o.dtype == dtype && o.d == d && o.num_heads == num_heads && o.act == act && o.norm_first == norm_first &&
           o.cross == cross && o.eps == eps && o.scale == scale;
  }
};

// Layers run one after the other in one call (layers_forward): one kind (with or without cross-attention) and
// the same settings, each its own feed-forward width.
struct LayerStack {
  std::vector<LayerWeights> layers;

  explicit LayerStack(std::vector<LayerWeights> layers_) : layers(std::move(layers_)) {
    const char* who = "LayerStack";
    TORCH_CHECK(!layers.empty(), who, ": give at least one layer");
    for (size_t l = 1; l < layers.size(); ++l)
      TORCH_CHECK(layers[l].same_settings(layers[0]), who, ": layer ", l, " differs from layer 0 in its kind, dtype, "
                  "d, num_heads, act, norm_first, eps or scale");
  }

  const LayerWeights& first() const { return layers[0]; }
};

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
