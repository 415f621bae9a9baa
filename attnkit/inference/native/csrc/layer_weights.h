// A Transformer layer's weights as the native compositions take them: a struct with named fields, made from a
// layer of the model's weight spec (attnkit/inference/native/__init__.py) and checked once, when it is made.
// The compositions (layer_forward.h, decoder_step.h, nat_first_pass.h) then check only what a call brings (its
// rows, lengths, keys and values) against it. Included once, by compositions.cpp, after the kernels' entry
// points (linear_ops.h, attention_ops.h).
//
// LayerWeights: each linear layer a pair (W in one of small_linear's packed layouts, b), each norm a pair
// (weight, bias): qkv (3d outputs), self_out, [cross_q, cross_out: a decoder layer,] ff1, ff2 (its inputs ff1's
// outputs); self_norm, [cross_norm,] ff_norm; out_features multiples of 16 (no padding rows); and the layer's
// settings: num_heads, norm_first (pre-LN), act (0 none, 1 ReLU, 2 SiLU, 3 GELU, 4 GELU tanh), the norms' eps,
// attention's scale. LayerStack: layers of one kind and the same settings, run in one call.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

using TensorPair = std::tuple<at::Tensor, at::Tensor>;

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

// The checks of one layer's tensors w (the kernels' order: W, b of each linear layer, then weight, bias of each
// norm) against dtype dt and d features; `which` names the layer in a stack (-1: alone). Returns whether the layer
// has cross-attention (18 tensors).
inline bool check_layer(const std::vector<at::Tensor>& w, at::ScalarType dt, int64_t d, const char* who,
                        int64_t which) {
  const std::string at_layer = which < 0 ? std::string() : " (layer " + std::to_string(which) + ")";
  TORCH_CHECK(w.size() == 12 || w.size() == 18, who, at_layer, ": a layer holds 12 tensors (an encoder layer) or 18 "
              "(with cross-attention); got ", w.size());
  for (const auto& p : w) TORCH_CHECK(p.defined(), who, at_layer, ": every tensor of the layer must be defined");
  const bool cross = w.size() == 18;
  const int lin = cross ? 6 : 4, ff1 = 2 * (lin - 2), ff2 = ff1 + 2, norms = 2 * lin;
  for (int i = 0; i < norms; i += 2) {
    TORCH_CHECK(packed_outputs(w[i]) > 0 && w[i].device().is_cpu() && w[i].scalar_type() == dt &&
                    w[i].is_contiguous(), who, at_layer, ": weight ", i / 2, " must be blocked (N / 4, K / 16, 4, 16) "
                "or in panels (float32 (N / 16, K, 16), bfloat16 (N / 16, K / 2, 16, 2)), contiguous, the weights' "
                "dtype, on the CPU");
    check_param(w[i + 1], dt, packed_outputs(w[i]), who, i + 1);
    TORCH_CHECK(packed_outputs(w[i]) % 16 == 0, who, at_layer, ": weight ", i / 2,
                " must have a multiple of 16 outputs");
  }
  TORCH_CHECK(packed_outputs(w[0]) == 3 * d, who, at_layer, ": the qkv weight must have 3d = ", 3 * d, " outputs");
  const int64_t dff = packed_outputs(w[ff1]);
  for (int i = 0; i < norms; i += 2) {
    TORCH_CHECK(i == 0 || i == ff1 || packed_outputs(w[i]) == d, who, at_layer, ": weight ", i / 2,
                " must have d = ", d, " outputs");
    TORCH_CHECK(packed_inputs(w[i]) == (i == ff2 ? dff : d), who, at_layer, ": weight ", i / 2, " must have ",
                i == ff2 ? "ff1's outputs" : "d", " inputs");
  }
  for (int i = norms; i < static_cast<int>(w.size()); ++i) check_param(w[i], dt, d, who, i);
  return cross;
}

}  // namespace layer_detail

struct LayerWeights {
  std::vector<at::Tensor> w;  // the kernels' order: W, b of each linear layer, then weight, bias of each norm
  at::ScalarType dtype;
  int64_t d, num_heads, act;
  bool norm_first, cross, blocked;  // blocked: every W in small_linear's blocked layout (a decoding step's)
  double eps, scale;

  LayerWeights(const TensorPair& qkv, const TensorPair& self_out, const TensorPair& ff1, const TensorPair& ff2,
               const TensorPair& self_norm, const TensorPair& ff_norm, const std::optional<TensorPair>& cross_q,
               const std::optional<TensorPair>& cross_out, const std::optional<TensorPair>& cross_norm,
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
    for (const TensorPair* p : {&qkv, &self_out}) add(*p);
    if (has) add(*cross_q), add(*cross_out);
    for (const TensorPair* p : {&ff1, &ff2, &self_norm}) add(*p);
    if (has) add(*cross_norm);
    add(ff_norm);
    for (const auto& p : w) TORCH_CHECK(p.defined(), who, ": every tensor of the layer must be defined");
    dtype = w[0].scalar_type();
    TORCH_CHECK(dtype == at::kFloat || (dtype == at::kBFloat16 && attnkit_simd::cpu_has_bf16()), who,
                ": the weights must be float32, or bfloat16 on a CPU with AVX512-BF16");
    d = packed_outputs(w[0]) / 3;
    cross = layer_detail::check_layer(w, dtype, d, who, -1);
    TORCH_CHECK(num_heads >= 1 && d % num_heads == 0, who, ": num_heads=", num_heads, " must divide d=", d);
    TORCH_CHECK((d / num_heads) % (dtype == at::kFloat ? 16 : 32) == 0, who, ": the head size d / num_heads = ",
                d / num_heads, " must be a multiple of 16 (bfloat16: 32)");
    TORCH_CHECK(act >= 0 && act <= 4, who, ": act must be 0 (none), 1 (ReLU), 2 (SiLU), 3 (GELU) or 4 (GELU tanh)");
    blocked = true;
    for (size_t i = 0; i < (cross ? 12u : 8u); i += 2) blocked = blocked && packed_layout(w[i]) == 1;
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
