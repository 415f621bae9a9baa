// One Transformer layer over every position of a few short rows, in one call: an encoder layer, or a
// non-autoregressive decoder layer (the same with cross-attention). The packed layer program of
// attnkit/inference/layer.py (PackedLayer) is its reference: the encoder engine and the NAT engine run it from
// Python where this does not apply. Included once, by compositions.cpp, after layer_weights.h.
//
//   post-LN (norm_first false)                     pre-LN (norm_first true)
//   q, k, v = x W_qkv + b                          q, k, v = LN1(x) W_qkv + b
//   x = LN1(x + attend(q, k, v) W_o + b)           x = x + attend(q, k, v) W_o + b
//   [x = LN2(x + cross(x W_cq + b) W_co + b)]      [x = x + cross(LN2(x) W_cq + b) W_co + b]
//   x = LNf(x + act(x W_1 + b) W_2 + b)            x = x + act(LNf(x) W_1 + b) W_2 + b
//
// The kernels are small_linear's (panel_sums or the blocked dot products, then the epilogue), int8_linear's for a
// layer's int8 linear layers (layer_int8.h), and short_forward's (attend), the same arithmetic in the same order. Calling them one by one costs a thread
// team per kernel and an allocation per result; here the whole layer is one OpenMP region. Each step splits
// its work over the threads (a linear layer's outputs in panels, attention's (row, head) jobs, LayerNorm's
// and the widening's rows) and a barrier separates the steps; every buffer is allocated before the region.
//
// Self-attention is unmasked apart from padding: position i of row b sees the first lengths[b] positions
// (lengths empty: all T). The bracketed cross-attention runs for a decoder layer (LayerWeights.cross).
// x (B, T, d); the layer's weights a LayerWeights (layer_weights.h), W in either packed layout (blocked, or
// panels: the faster from 5 rows on); cross_keys, cross_values (B, H, S, dh), the last dim contiguous;
// cross_lengths: short_forward's key lengths.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <omp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "layer_int8.h"
#include "layer_weights.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

namespace layer_detail {

// The work of one thread of the region: its share of each step, in order.
template <typename S>
struct Layer {
  const std::vector<at::Tensor>& w;
  int64_t b, t, d, h, dh, dff, n;
  bool cross, norm_first;
  int64_t act;
  float eps, scale;
  const int64_t *len, *cross_len;
  const S *cq_k, *cq_v;  // cross keys / values, (B / group, H, S, dh) with strides below
  int64_t ck_s[3], cv_s[3], src;
  int64_t group;         // rows (beams) that share a row of the cross keys and values: its queries
  S *cache_k, *cache_v;  // a decoding step (t = 1): the K, V cache (capacity, B, H, dh); else null
  int64_t pos;           // the step's position in the cache
  float* xf;             // float32 rows (n, max(d, dff)): the current linear layer's input
  uint16_t* xb;          // bfloat16 layers: the same rows normalised, rounded to bfloat16 (the panels' input)
  float* sums;           // per thread (sums_size floats each): float32 sums of its outputs
  int64_t sums_size;
  std::vector<attnkit_short::Scratch>* scratch;  // per thread: attention's
  float* yf;             // post-LN: float32 sums (n, d) before the norm
  S *qkv, *o, *y, *q, *f, *out;
  const Int8Linears* q8 = nullptr;  // the layer's int8 linear layers (set after the rest)
  Int8Scratch* i8 = nullptr;
  int64_t width = 0;                     // a step: the cache's rows per position (>= b with a row table)
  const int64_t* cache_rows = nullptr;   // a step's row table: row r's position j at cache row cache_rows[r rs + j]
  int64_t rows_stride = 0;

  const S* ptr(int i) const { return reinterpret_cast<const S*>(w[i].data_ptr()); }

  // rows [r0, r1) of this thread's share of n rows
  static void share(int64_t n, int tid, int nt, int64_t& r0, int64_t& r1) {
    r0 = n * tid / nt;
    r1 = n * (tid + 1) / nt;
  }

  // The input rows of linear layer l: float32 (the blocked kernel's) and x's dtype (the panels'):
  // float32 x itself (no norm) or xf = x widened (pre-LN with norm i: LN_i(x)), this thread's rows;
  // bfloat16 x itself (no norm; widened too for blocked W) or xb = LN_i(x) rounded (and xf). The caller's
  // barrier then makes them whole.
  struct Rows {
    const float* f;
    const S* s;
  };
  // nothing to write: no norm, and float32 x, or bfloat16 x into panels
  bool in_place(int norm, int l) const {
    return norm < 0 && (std::is_same<S, float>::value || packed_layout(w[2 * l]) == 2);
  }
  Rows input(const S* x, int norm) const {
    if constexpr (std::is_same<S, float>::value) {
      const float* f = norm < 0 ? x : xf;
      return {f, f};
    }
    return {xf, norm < 0 ? x : reinterpret_cast<const S*>(xb)};
  }
  void widen(const S* x, int64_t k, int norm, int l, int tid, int nt) const {
    if (in_place(norm, l)) return;
    int64_t r0, r1;
    share(n, tid, nt, r0, r1);
    const int z = 2 * (cross ? 6 : 4) + 2 * norm;
    const S* g = norm >= 0 ? ptr(z) : nullptr;
    const S* hb = norm >= 0 ? ptr(z + 1) : nullptr;
    attnkit_linear::widen_rows<S>(x + r0 * k, r1 - r0, k, g, hb, eps, xf + r0 * k);
    if (!std::is_same<S, float>::value && norm >= 0)
      attnkit_linear::narrow_rows(xf + r0 * k, r1 - r0, k, xb + r0 * k);
  }

  // dst = act(in W_l^T + b_l) [+ res], this thread's outputs (whole pairs of panels); O: S or float
  template <typename O>
  void linear(Rows in, int l, const S* res, O* dst, int64_t a, int tid, int nt) const {
    if constexpr (std::is_same<S, float>::value) {
      if ((*q8)[l]) return int8_share<O>(in.f, *(*q8)[l], res, dst, a, n, tid, nt, *i8, sums + tid * sums_size);
    }
    const at::Tensor& wt = w[2 * l];
    const int64_t k = packed_inputs(wt), nout = packed_outputs(wt);
    const bool panels = packed_layout(wt) == 2;
    const int64_t units = panels ? nout / 32 : nout / 16;  // panels in pairs (as panel_sums takes them)
    int64_t u0, u1;
    share(units, tid, nt, u0, u1);
    const int64_t unit = panels ? 32 : 16;
    const int64_t c0 = u0 * unit, c1 = tid == nt - 1 ? nout : u1 * unit;  // the last thread: an odd panel too
    if (c1 <= c0) return;
    float* s = sums + tid * sums_size;
    const S* bias = ptr(2 * l + 1);
    if (panels) {
      attnkit_linear::panel_sums<S>(in.s, ptr(2 * l), n, k, c0, c1, s);
      attnkit_linear::epilogue<S, O>(s, bias, res, dst, n, nout, c0, c1, a);
    } else {
      attnkit_linear::small_linear_cols<S, O, true>(in.f, ptr(2 * l), bias, res, dst, n, nout, k, c0, c1, a, s);
    }
  }

  // dst rows = LN_i(yf rows): post-LN, this thread's rows
  void norm_rows(int i, S* dst, int tid, int nt) const {
    int64_t r0, r1;
    share(n, tid, nt, r0, r1);
    const int z = 2 * (cross ? 6 : 4) + 2 * i;
    for (int64_t r = r0; r < r1; ++r) {
      float mean, rstd;
      attnkit_linear::row_mean_rstd(yf + r * d, d, eps, mean, rstd);
      attnkit_norm::row_out<S>(yf + r * d, ptr(z), ptr(z + 1), dst + r * d, d, mean, rstd);
    }
  }

  // o (B, T, H, dh) = attention of the queries at qp (row stride qs) against keys / values, in (unit, head)
  // jobs: a unit is a row of self-attention, or the `group` rows that share a row of the memory
  void attend(const S* qp, int64_t qs, bool to_memory, int tid, int nt) const {
    const int64_t g = to_memory ? group : 1, units = b / g;
    int64_t j0, j1;
    share(units * h, tid, nt, j0, j1);
    for (int64_t job = j0; job < j1; ++job) {
      const int64_t r = job / h, hd = job % h;
      attnkit_short::Seq<S> a;
      a.q = qp + r * g * t * qs + hd * dh;
      a.qs = qs;
      a.o = o + r * g * t * d + hd * dh;
      a.os = d;
      a.nq = static_cast<int>(g * t);
      if (to_memory) {
        a.k = cq_k + r * ck_s[0] + hd * ck_s[1];
        a.v = cq_v + r * cv_s[0] + hd * cv_s[1];
        a.ks = ck_s[2];
        a.vs = cv_s[2];
        a.nk = static_cast<int>(cross_len ? std::min<int64_t>(src, std::max<int64_t>(cross_len[r], 0)) : src);
      } else if (cache_k != nullptr) {  // a step: this row's new key and value into the cache, then all of it
        const int64_t at = r * d + hd * dh;  // (width, H, dh) offset of (row, head) at a position
        std::copy(qkv + r * 3 * d + d + hd * dh, qkv + r * 3 * d + d + (hd + 1) * dh, cache_k + pos * width * d + at);
        std::copy(qkv + r * 3 * d + 2 * d + hd * dh, qkv + r * 3 * d + 2 * d + (hd + 1) * dh,
                  cache_v + pos * width * d + at);
        const int64_t from = cache_rows ? hd * dh : at;  // with a row table: its rows, d apart
        a.k = cache_k + from;
        a.v = cache_v + from;
        a.ks = a.vs = width * d;
        a.rows = cache_rows ? cache_rows + r * rows_stride : nullptr;
        a.krs = a.vrs = d;
        a.nk = static_cast<int>(pos + 1);
      } else {
        a.k = qkv + r * t * 3 * d + d + hd * dh;
        a.v = qkv + r * t * 3 * d + 2 * d + hd * dh;
        a.ks = a.vs = 3 * d;
        a.nk = static_cast<int>(len ? std::min<int64_t>(t, std::max<int64_t>(len[r], 0)) : t);
      }
      attnkit_short::attend<S>(a, static_cast<int>(dh), static_cast<int>(dh), scale, (*scratch)[tid]);
    }
  }

  // residual + (in W_l^T + b): y = that (pre-LN) or LN_i of it (post-LN)
  void residual(Rows in, int l, const S* res, S* dst, int i, int tid, int nt) const {
    if (norm_first) {
      linear<S>(in, l, res, dst, 0, tid, nt);
      return;
    }
    linear<float>(in, l, res, yf, 0, tid, nt);
#pragma omp barrier
    norm_rows(i, dst, tid, nt);
  }

  // the steps; a barrier after each (a widening that does nothing needs none)
  void run(const S* x, int tid, int nt) const {
    const int lin = cross ? 6 : 4, ff1 = lin - 2, ff2 = lin - 1, last = lin / 2 - 1;
    const auto widened = [&](const S* v, int64_t k, int norm, int l) {  // the input rows of linear layer l
      widen(v, k, norm, l, tid, nt);
      if (!in_place(norm, l)) {
#pragma omp barrier
      }
      return input(v, norm);
    };
    // self-attention
    const Rows in = widened(x, d, norm_first ? 0 : -1, 0);
    linear<S>(in, 0, nullptr, qkv, 0, tid, nt);
#pragma omp barrier
    attend(qkv, 3 * d, false, tid, nt);
#pragma omp barrier
    residual(widened(o, d, -1, 1), 1, x, y, 0, tid, nt);
#pragma omp barrier
    const S* cur = y;
    if (cross) {  // every position of a row against its memory
      linear<S>(widened(y, d, norm_first ? 1 : -1, 2), 2, nullptr, q, 0, tid, nt);
#pragma omp barrier
      attend(q, d, true, tid, nt);
#pragma omp barrier
      residual(widened(o, d, -1, 3), 3, y, qkv, 1, tid, nt);  // into qkv's buffer, free now
#pragma omp barrier
      cur = qkv;
    }
    // feed-forward, the activation inside ff1's epilogue
    linear<S>(widened(cur, d, norm_first ? last : -1, ff1), ff1, nullptr, f, act, tid, nt);
#pragma omp barrier
    residual(widened(f, dff, -1, ff2), ff2, cur, out, last, tid, nt);
  }
};

// Everything after the entry points' checks: the buffers (allocated before the region: nothing in it
// allocates or throws), then the region. x: b rows of t positions, (b * t, d) in memory -> (b * t, d).
// ws: the layers, run one after the other in the same region (a barrier between two), layer i's cross
// keys and values cks[i], cvs[i] (cross-attention); the output of one is the input of the next (two
// buffers in turn), the scratch is shared.
inline at::Tensor run_layers(const at::Tensor& x, const std::vector<const LayerWeights*>& ws, int64_t b,
                             int64_t t, int64_t h, bool cross, bool norm_first, int64_t act, double eps, double scale,
                             const int64_t* len, const std::vector<const at::Tensor*>& cks,
                             const std::vector<const at::Tensor*>& cvs, const int64_t* cross_len, int64_t group,
                             const at::Tensor* keys, const at::Tensor* values, int64_t pos,
                             const at::Tensor* rows = nullptr) {
  const int64_t n = b * t, d = x.size(-1), dh = d / h, layers = static_cast<int64_t>(ws.size());
  int64_t dff = 0, src = 0;
  int64_t kmax = 0, kpmax = 0;  // the int8 linear layers' widest inputs, and padded
  for (int64_t l = 0; l < layers; ++l) {
    dff = std::max(dff, outputs_of(ws[l]->w, ws[l]->q8, cross ? 4 : 2));
    if (cross) src = std::max(src, cks[l]->size(2));
    for (const auto& iw : ws[l]->q8)
      if (iw) kmax = std::max(kmax, iw->inputs()), kpmax = std::max(kpmax, iw->kp());
  }
  auto opts = x.options();
  auto out = at::empty({n, d}, opts);
  if (n == 0) return out;
  auto other = layers > 1 ? at::empty({n, d}, opts) : at::Tensor();  // the layers write out and other in turn
  auto qkv = at::empty({n, 3 * d}, opts), o = at::empty({n, d}, opts), y = at::empty({n, d}, opts);
  auto f = at::empty({n, dff}, opts);
  auto q = cross ? at::empty({n, d}, opts) : at::Tensor();
  const auto xf = attnkit_simd::scratch_floats(static_cast<size_t>(n * std::max(d, dff)));
  const std::unique_ptr<uint16_t[]> xb(x.scalar_type() == at::kFloat ? nullptr
                                                                       : new uint16_t[n * std::max(d, dff)]);
  const auto yf = attnkit_simd::scratch_floats(norm_first ? 0 : static_cast<size_t>(n * d));
  const int nt = at::in_parallel_region() ? 1 : std::max(1, std::min<int>(at::get_num_threads(), 64));
  const int64_t sums_size = n * std::max(3 * d, dff);
  const auto sums = attnkit_simd::scratch_floats(static_cast<size_t>(nt * sums_size));
  const int kw = static_cast<int>((std::max({t, src, pos + 1}) + 15) / 16 * 16);
  std::vector<attnkit_short::Scratch> scratch;
  scratch.reserve(nt);
  for (int i = 0; i < nt; ++i) scratch.emplace_back(static_cast<int>(dh), static_cast<int>(dh), std::max(kw, 16));
  Int8Buffers i8(n, kmax, kpmax);

  auto go = [&](auto tag) {
    using S = decltype(tag);
    auto p = [](const at::Tensor* u) {
      return u != nullptr && u->defined() ? reinterpret_cast<S*>(u->data_ptr()) : nullptr;
    };
    std::vector<Layer<S>> steps;
    steps.reserve(layers);
    for (int64_t l = 0; l < layers; ++l) {  // the last layer writes out
      const at::Tensor* dst = (layers - 1 - l) % 2 == 0 ? &out : &other;
      const at::Tensor* ck = cross ? cks[l] : nullptr;
      const at::Tensor* cv = cross ? cvs[l] : nullptr;
      steps.push_back(Layer<S>{ws[l]->w, b, t, d, h, dh, outputs_of(ws[l]->w, ws[l]->q8, cross ? 4 : 2), n, cross, norm_first,
                               act, static_cast<float>(eps), static_cast<float>(scale), len, cross_len, p(ck), p(cv),
                               {0, 0, 0}, {0, 0, 0}, cross ? ck->size(2) : 0, group, p(keys), p(values), pos,
                               xf.get(), xb.get(), sums.get(), sums_size, &scratch, yf.get(), p(&qkv), p(&o), p(&y),
                               p(&q), p(&f), p(dst)});
      steps.back().q8 = &ws[l]->q8;
      steps.back().i8 = &i8.view;
      steps.back().width = keys != nullptr ? keys->size(1) : b;
      if (rows != nullptr) {
        steps.back().cache_rows = rows->data_ptr<int64_t>();
        steps.back().rows_stride = rows->stride(0);
      }
      for (int i = 0; cross && i < 3; ++i) {
        steps.back().ck_s[i] = ck->stride(i);
        steps.back().cv_s[i] = cv->stride(i);
      }
    }
    const S* xp = reinterpret_cast<const S*>(x.data_ptr());
#pragma omp parallel num_threads(nt)
    {
      const int tid = omp_get_thread_num(), team = omp_get_num_threads();
      for (int64_t l = 0; l < layers; ++l) {
        if (l > 0) {
#pragma omp barrier
        }
        steps[l].run(l == 0 ? xp : steps[l - 1].out, tid, team);
      }
    }
  };
  if (x.scalar_type() == at::kFloat)
    go(float{});
  else
    go(uint16_t{});
  return out;
}

// One layer (layer_forward, decoder_layer_step).
inline at::Tensor run(const at::Tensor& x, const LayerWeights& w, int64_t b, int64_t t, int64_t h,
                      bool cross, bool norm_first, int64_t act, double eps, double scale, const int64_t* len,
                      const at::Tensor* ck, const at::Tensor* cv, const int64_t* cross_len, int64_t group,
                      const at::Tensor* keys, const at::Tensor* values, int64_t pos, const at::Tensor* rows = nullptr) {
  return run_layers(x, {&w}, b, t, h, cross, norm_first, act, eps, scale, len, {ck}, {cv}, cross_len, group, keys,
                    values, pos, rows);
}

}  // namespace layer_detail

inline at::Tensor layer_forward(const at::Tensor& x, const LayerWeights& layer, const at::Tensor& lengths,
                                const std::optional<at::Tensor>& cross_keys,
                                const std::optional<at::Tensor>& cross_values, const at::Tensor& cross_lengths) {
  const char* who = "layer_forward";
  layer.check_rows(x, 3, who);
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), h = layer.num_heads, dh = d / h;
  const bool cross = layer.cross;
  const bool has_ck = cross_keys.has_value() && cross_keys->defined();
  const bool has_cv = cross_values.has_value() && cross_values->defined();
  TORCH_CHECK(has_ck == cross && has_cv == cross, who,
              ": give cross_keys and cross_values with a decoder layer (cross-attention) and neither with an encoder "
              "layer");
  const int64_t* len = lengths_ptr(lengths, b, who);
  const int64_t* cross_len = nullptr;
  if (cross) {
    layer_detail::check_memory(*cross_keys, b, h, dh, layer.dtype, who, "cross_keys");
    layer_detail::check_memory(*cross_values, b, h, dh, layer.dtype, who, "cross_values");
    TORCH_CHECK(cross_values->size(2) == cross_keys->size(2), who,
                ": cross_keys and cross_values must have the same S");
    cross_len = lengths_ptr(cross_lengths, b, who);
  }
  return layer_detail::run(x, layer, b, t, h, cross, layer.norm_first, layer.act, layer.eps, layer.scale, len,
                           cross ? &*cross_keys : nullptr, cross ? &*cross_values : nullptr, cross_len, 1, nullptr,
                           nullptr, 0)
      .view({b, t, d});
}

// layer_forward of every layer of the stack in turn, in one call (one region, the buffers allocated once): an
// encoder's layers, or a non-autoregressive decoder's with cross_keys[i], cross_values[i] the memory projected by
// layer i (empty lists for an encoder). The same results as calling layer_forward layer by layer.
inline at::Tensor layers_forward(const at::Tensor& x, const LayerStack& stack, const at::Tensor& lengths,
                                 const std::vector<at::Tensor>& cross_keys, const std::vector<at::Tensor>& cross_values,
                                 const at::Tensor& cross_lengths) {
  const char* who = "layers_forward";
  const LayerWeights& first = stack.first();
  first.check_rows(x, 3, who);
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), h = first.num_heads, dh = d / h;
  const int64_t layers = static_cast<int64_t>(stack.layers.size());
  const bool cross = first.cross;
  TORCH_CHECK(static_cast<int64_t>(cross_keys.size()) == (cross ? layers : 0) &&
                  cross_values.size() == cross_keys.size(), who, ": give one cross_keys and one cross_values per "
              "layer with cross-attention (", layers, " layers) and none without; got ", cross_keys.size(), " and ",
              cross_values.size());
  const int64_t* len = lengths_ptr(lengths, b, who);
  const int64_t* cross_len = cross ? lengths_ptr(cross_lengths, b, who) : nullptr;
  std::vector<const LayerWeights*> wp;
  std::vector<const at::Tensor*> ck, cv;
  for (int64_t l = 0; l < layers; ++l) {
    wp.push_back(&stack.layers[l]);
    if (!cross) continue;
    layer_detail::check_memory(cross_keys[l], b, h, dh, first.dtype, who, "cross_keys");
    layer_detail::check_memory(cross_values[l], b, h, dh, first.dtype, who, "cross_values");
    TORCH_CHECK(cross_values[l].size(2) == cross_keys[l].size(2), who, ": layer ", l,
                ": cross_keys and cross_values must have the same S");
    ck.push_back(&cross_keys[l]);
    cv.push_back(&cross_values[l]);
  }
  if (!cross) ck.assign(layers, nullptr), cv.assign(layers, nullptr);
  return layer_detail::run_layers(x, wp, b, t, h, cross, first.norm_first, first.act, first.eps, first.scale, len, ck,
                                  cv, cross_len, 1, nullptr, nullptr, 0)
      .view({b, t, d});
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
