// One decoder layer for one new position of every row (a decoding step), in one call: the packed layer
// program of attnkit/inference/layer.py (PackedLayer, as Seq2SeqEngine's step runs it from Python) is its
// reference. At batch 1 a step's arithmetic is a pass over the weights, and dispatching its six
// matrix-vector products and two attention kernels one by one (a thread team each) costs a noticeable share
// of a small model's step. It runs in layer_forward.h's region (t = 1 position per row, the K, V cache written
// in place, a sentence's `group` beams the queries of its memory). Included once, by compositions.cpp, after
// layer_forward.h.
//
//   post-LN (norm_first false)                     pre-LN (norm_first true)
//   q, k, v = x W_qkv + b                          q, k, v = LN1(x) W_qkv + b
//   keys[t], values[t] = k, v                      (same)
//   x = LN1(x + attend(q, keys[:t+1]) W_o + b)     x = x + attend(q, keys[:t+1]) W_o + b
//   x = LN2(x + cross(x W_cq + b) W_co + b)        x = x + cross(LN2(x) W_cq + b) W_co + b
//   x = LN3(x + act(x W_1 + b) W_2 + b)            x = x + act(LN3(x) W_1 + b) W_2 + b
//
// x (B, d); the layer a decoder layer's LayerWeights, W blocked (a few rows: one pass over W) or in panels (a
// beam search's batch: the rows share each panel's loads; layer_forward.h's linear step takes either); keys,
// values (capacity, B, H, dh) time-major; cross_keys, cross_values (B / group, H, S, dh): a sentence's `group`
// beams share its memory; cross_lengths: short_forward's key lengths (empty: none). rows: none, or a row table
// (B, >= t + 1) int64: row r's key and value at position j < t are at row rows[r, j] of keys and values
// (capacity, >= B, H, dh); rows[r, t] must be r (the step writes its key there).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

inline at::Tensor decoder_layer_step(const at::Tensor& x, const LayerWeights& layer, const at::Tensor& keys,
                                     const at::Tensor& values, int64_t t, const at::Tensor& cross_keys,
                                     const at::Tensor& cross_values, const at::Tensor& cross_lengths, int64_t group,
                                     const std::optional<at::Tensor>& rows) {
  const char* who = "decoder_layer_step";
  TORCH_CHECK(layer.cross, who, ": the layer must be a decoder layer (cross-attention)");
  layer.check_rows(x, 2, who);
  const auto dt = layer.dtype;
  TORCH_CHECK(keys.defined() && values.defined() && keys.dim() == 4 && values.sizes() == keys.sizes() &&
                  keys.is_contiguous() && values.is_contiguous(),
              who, ": `keys` and `values` must be (capacity, B, H, dh), equal shapes, contiguous");
  const int64_t b = x.size(0), d = x.size(1), h = layer.num_heads, dh = d / h;
  const bool table = rows.has_value() && rows->defined();
  TORCH_CHECK((table ? keys.size(1) >= b : keys.size(1) == b) && keys.size(2) == h && keys.size(3) == dh, who,
              ": `keys` (", keys.sizes(), ") does not fit x (", x.sizes(), ") and the layer's ", h, " heads");
  TORCH_CHECK(t >= 0 && t < keys.size(0), who, ": position t=", t, " outside the cache's capacity ", keys.size(0));
  if (table) {
    const int64_t* p = row_table(*rows, b, t + 1, keys.size(1), nullptr, true, who);
    for (int64_t r = 0; r < b; ++r)
      TORCH_CHECK(p[r * rows->stride(0) + t] == r, who, ": rows[r, t] must be r (the step's key goes there)");
  }
  TORCH_CHECK(group >= 1 && b % group == 0, who, ": `group` must divide the batch ", b, ", got ", group);
  TORCH_CHECK(keys.device().is_cpu() && values.device().is_cpu() && keys.scalar_type() == dt &&
                  values.scalar_type() == dt, who, ": `keys` and `values` must be x's dtype, on the CPU");
  check_sizes(keys, who, "keys");
  layer_detail::check_memory(cross_keys, b / group, h, dh, dt, who, "cross_keys");
  layer_detail::check_memory(cross_values, b / group, h, dh, dt, who, "cross_values");
  TORCH_CHECK(cross_values.size(2) == cross_keys.size(2), who, ": cross_keys and cross_values must have the same S");
  const int64_t* cross_len = lengths_ptr(cross_lengths, b / group, who);
  return layer_detail::run(x, layer, b, 1, h, true, layer.norm_first, layer.act, layer.eps, layer.scale, nullptr,
                           &cross_keys, &cross_values, cross_len, group, &keys, &values, t,
                           table ? &*rows : nullptr);
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
