// A non-autoregressive model's first pass over one unpadded sentence, in one call: what
// FastNAT.first_pass (attnkit/pretrained/fast_nat.py) runs from Python, its reference, as the same entry
// points in the same order (the same results, bit for bit). At batch 1 a sentence's native work is about
// 0.4 ms in bfloat16 and the Python between the calls (thirty small torch operations, ten Python frames)
// cost another 0.06 ms (0.1 in float32): here it is C++ and ATen. Included once, by module.cpp, after
// layer_forward.h and best_tokens.h.
//
//   x      = E_src[ids] + P[:S]                           (1, S, d)   (the table already times sqrt(d))
//   memory = LN_enc(encoder layers(x))                    (1, S, d)   (layers_forward)
//   T      = clamp(argmax(mean_s(memory) W_len + b) + S - m, 1, max_T)   (small_linear)
//   kv     = memory W_kv + b                              (S, layers 2d): every layer's cross K, V
//   y      = decoder layers(M[:T], kv)                    (1, T, d)   (layers_forward; M: T mask tokens)
//   tokens, logp = best allowed token of LN_dec(y) W_out + b   (small_linear, best_tokens)
//
// NatFirstPass holds the weights, checked once when it is made; a call checks the sentence and the
// suppressed ids. A T the decoder layers do not take in one call (more than max_rows) returns no tokens:
// the caller continues from the memory and T on its general path.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace attnkit_ops {

// A linear layer as small_linear takes it: W blocked and in panels (the panels from panels_from rows on),
// the bias padded to the packed outputs (empty: none); `outputs` the layer's own (the rest are padding).
struct PackedRows {
  at::Tensor blocked, panels, bias;
  int64_t panels_from, outputs;

  at::Tensor operator()(const at::Tensor& x, const at::Tensor& norm_w = {}, const at::Tensor& norm_b = {},
                        double eps = 1e-5) const {
    const at::Tensor& w = x.size(0) >= panels_from ? panels : blocked;
    const auto opt = [](const at::Tensor& t) {
      return t.defined() && t.numel() ? c10::optional<at::Tensor>(t) : c10::nullopt;
    };
    auto y = small_linear(x, w, opt(bias), c10::nullopt, 0, c10::nullopt, c10::nullopt, eps, opt(norm_w), opt(norm_b));
    return y.size(1) == outputs ? y : y.narrow(1, 0, outputs);
  }
};

class NatFirstPass {
 public:
  // src_table (V_src, d); positions (P, d) or empty; encoder / decoder: each layer's w (layers_forward's);
  // the final norms' [weight, bias] or empty, their eps norm_eps; length, cross_kv, output: [blocked W, W in
  // panels, bias (empty: none)]; linear_sizes: for each of the three in turn, the rows from which W in
  // panels is used and its own outputs (the packed ones past them are padding); mask_rows (1, max_T, d):
  // the decoder's input of max_T mask tokens (T is clamped to [1, max_T]).
  NatFirstPass(at::Tensor src_table, at::Tensor positions, std::vector<std::vector<at::Tensor>> encoder,
               std::vector<at::Tensor> encoder_norm, std::vector<std::vector<at::Tensor>> decoder,
               std::vector<at::Tensor> decoder_norm, double norm_eps, int64_t num_heads, bool norm_first,
               int64_t act, double eps, double scale, std::vector<at::Tensor> length, int64_t length_offset,
               std::vector<at::Tensor> cross_kv, std::vector<at::Tensor> output, std::vector<int64_t> linear_sizes,
               at::Tensor mask_rows, int64_t max_rows)
      : src_(std::move(src_table)), pos_(std::move(positions)), enc_(std::move(encoder)),
        enc_norm_(std::move(encoder_norm)), dec_(std::move(decoder)), dec_norm_(std::move(decoder_norm)),
        norm_eps_(norm_eps), heads_(num_heads), norm_first_(norm_first), act_(act), eps_(eps), scale_(scale),
        offset_(length_offset), mask_(std::move(mask_rows)), max_rows_(max_rows) {
    const char* who = "NatFirstPass";
    TORCH_CHECK(src_.defined() && src_.dim() == 2 && src_.is_contiguous() && src_.device().is_cpu(), who,
                ": `src_table` must be a contiguous (V, d) CPU tensor");
    const auto dt = src_.scalar_type();
    const int64_t d = src_.size(1);
    TORCH_CHECK(dt == at::kFloat || (dt == at::kBFloat16 && attnkit_simd::cpu_has_bf16()), who,
                ": `src_table` must be float32, or bfloat16 on a CPU with AVX512-BF16");
    TORCH_CHECK(heads_ >= 1 && d % heads_ == 0 && (d / heads_) % (dt == at::kFloat ? 16 : 32) == 0, who,
                ": num_heads=", heads_, " must divide d=", d, " into heads of a multiple of 16 (bfloat16: 32)");
    TORCH_CHECK(act_ >= 0 && act_ <= 4, who, ": act must be 0 (none), 1 (ReLU), 2 (SiLU), 3 (GELU) or 4 (GELU tanh)");
    TORCH_CHECK(!pos_.defined() || pos_.numel() == 0 ||
                    (pos_.dim() == 2 && pos_.size(1) == d && pos_.scalar_type() == dt && pos_.device().is_cpu()),
                who, ": `positions` must be (P, ", d, ") in src_table's dtype, on the CPU, or empty");
    TORCH_CHECK(!enc_.empty() && !dec_.empty(), who, ": give at least one encoder and one decoder layer");
    for (size_t l = 0; l < enc_.size(); ++l)
      TORCH_CHECK(!layer_detail::check_layer(enc_[l], dt, d, who, l), who, ": encoder layer ", l,
                  " must have no cross-attention (12 tensors)");
    for (size_t l = 0; l < dec_.size(); ++l)
      TORCH_CHECK(layer_detail::check_layer(dec_[l], dt, d, who, l), who, ": decoder layer ", l,
                  " must have cross-attention (18 tensors)");
    for (const auto* norm : {&enc_norm_, &dec_norm_}) {
      TORCH_CHECK(norm->empty() || norm->size() == 2, who, ": a norm is [weight, bias] or empty");
      for (const auto& p : *norm) layer_detail::check_param(p, dt, d, who, 0);
    }
    TORCH_CHECK(linear_sizes.size() == 6, who, ": `linear_sizes` must give 6 numbers: panels from, outputs of "
                "length, cross_kv and output");
    const int64_t layers = static_cast<int64_t>(dec_.size()), *z = linear_sizes.data();
    length_ = packed(length, z[0], d, z[1], dt, "length");
    kv_ = packed(cross_kv, z[2], d, z[3], dt, "cross_kv");
    TORCH_CHECK(kv_.outputs == 2 * d * layers, who, ": `cross_kv` must have 2d x decoder layers = ", 2 * d * layers,
                " outputs, got ", kv_.outputs);
    out_ = packed(output, z[4], d, z[5], dt, "output");
    TORCH_CHECK(offset_ >= 0 && length_.outputs >= 1, who, ": `length_offset` must be >= 0");
    TORCH_CHECK(mask_.defined() && mask_.dim() == 3 && mask_.size(0) == 1 && mask_.size(2) == d &&
                    mask_.size(1) >= 1 && mask_.is_contiguous() && mask_.scalar_type() == dt &&
                    mask_.device().is_cpu(),
                who, ": `mask_rows` must be a contiguous (1, max_T, ", d, ") CPU tensor in src_table's dtype");
    TORCH_CHECK(max_rows_ >= 1, who, ": `max_rows` must be >= 1");
  }

  // ids (1, S) int64, suppressed (n,) int64 ids in [0, V_out) -> memory (1, S, d), lengths (1, 1) int64,
  // tokens (1, T) int64 and logp (1, T) float32 (undefined when T > max_rows), kv (S, layers 2d).
  using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
  Result operator()(const at::Tensor& ids, const at::Tensor& suppressed) const {
    const char* who = "NatFirstPass";
    TORCH_CHECK_VALUE(ids.defined() && ids.device().is_cpu() && ids.scalar_type() == at::kLong && ids.dim() == 2 &&
                          ids.size(0) == 1 && ids.size(1) >= 1 && ids.is_contiguous(),
                      who, ": `input_ids` must be a contiguous (1, S) int64 CPU tensor with S >= 1");
    const int64_t s = ids.size(1), d = src_.size(1), vocab = src_.size(0);
    TORCH_CHECK_VALUE(s <= max_rows_ && (pos_.numel() == 0 || s <= pos_.size(0)), who, ": `input_ids` has ", s,
                      " tokens, more than the ", std::min(max_rows_, pos_.numel() ? pos_.size(0) : max_rows_),
                      " this pass takes");
    const int64_t* idp = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < s; ++i)
      TORCH_CHECK_VALUE(idp[i] >= 0 && idp[i] < vocab, who, ": `input_ids` holds ", idp[i], " at position ", i,
                        ", outside the source vocabulary [0, ", vocab, ")");
    const at::Tensor bad = sorted_ids(suppressed, out_.outputs);
    // the encoder
    at::Tensor x = at::embedding(src_, ids);  // (1, S, d)
    if (pos_.numel()) x = x + pos_.narrow(0, 0, s);
    std::vector<at::Tensor> none;
    const at::Tensor no_lengths = at::empty({0}, ids.options());
    at::Tensor memory = layers_forward(x, enc_, heads_, no_lengths, none, none, no_lengths, norm_first_, act_, eps_,
                                       scale_);
    if (!enc_norm_.empty()) memory = at::layer_norm(memory, {d}, enc_norm_[0], enc_norm_[1], norm_eps_);
    // the length: the classifier's best offset from the mean of the memory
    const at::Tensor scores = length_(memory.sum(1) / s);  // (1, 2m + 1)
    const int64_t best = std::get<1>(scores.topk(1, 1)).item<int64_t>();
    const int64_t t = std::clamp<int64_t>(best + s - offset_, 1, mask_.size(1));
    at::Tensor lengths = at::full({1, 1}, t, ids.options());
    // every decoder layer's cross keys and values, then the decoder over T mask tokens
    const at::Tensor kv = kv_(memory.view({s, d}));  // (S, layers 2d)
    if (t > max_rows_) return {memory, lengths, at::Tensor(), at::Tensor(), kv};
    const int64_t layers = static_cast<int64_t>(dec_.size()), h = heads_, dh = d / heads_;
    // (S, layers 2d) -> (1, S, layers, 2, H, dh) -> (layers, 2, 1, H, S, dh)
    const at::Tensor split = kv.view({1, s, layers, 2, h, dh}).permute({2, 3, 0, 4, 1, 5});
    std::vector<at::Tensor> keys, values;
    for (int64_t l = 0; l < layers; ++l) {
      keys.push_back(split[l][0]);
      values.push_back(split[l][1]);
    }
    const at::Tensor y = layers_forward(mask_.narrow(1, 0, t), dec_, heads_, no_lengths, keys, values, no_lengths,
                                        norm_first_, act_, eps_, scale_);
    // the output layer (the decoder's norm inside its call), each position's best allowed token
    const at::Tensor rows = y.view({t, d});
    at::Tensor logits = dec_norm_.empty() ? out_(rows) : out_(rows, dec_norm_[0], dec_norm_[1], norm_eps_);
    logits = logits.contiguous();
    auto [logp, tokens] = best_tokens(logits, bad);
    const int64_t* tp = tokens.data_ptr<int64_t>();
    for (int64_t i = 0; i < t; ++i) {
      if (tp[i] >= 0) continue;  // a row the kernel leaves undecided (NaN, +inf, nothing allowed): the reference's
      const double ninf = -std::numeric_limits<double>::infinity();
      auto [lp, id] = logits[i].to(at::kFloat).log_softmax(-1).index_fill_(-1, bad, ninf).max(-1);
      logp[i] = lp;
      tokens[i] = id;
    }
    return {memory, lengths, tokens.view({1, t}), logp.view({1, t}), kv};
  }

 private:
  static PackedRows packed(const std::vector<at::Tensor>& p, int64_t panels_from, int64_t inputs, int64_t outputs,
                           at::ScalarType dt, const char* name) {
    const char* who = "NatFirstPass";
    TORCH_CHECK(p.size() == 3 && p[0].defined() && p[1].defined() && p[2].defined(), who, ": `", name,
                "` must be [blocked W, W in panels, bias]");
    TORCH_CHECK(packed_layout(p[0]) == 1 && packed_layout(p[1]) == 2 && packed_outputs(p[0]) == packed_outputs(p[1]) &&
                    packed_inputs(p[0]) == inputs && packed_inputs(p[1]) == inputs,
                who, ": `", name, "` must hold W blocked (N / 4, K / 16, 4, 16) and in panels, K = ", inputs);
    for (const auto& w : {p[0], p[1]})
      TORCH_CHECK(w.scalar_type() == dt && w.is_contiguous() && w.device().is_cpu(), who, ": `", name,
                  "`'s W must be contiguous, in src_table's dtype, on the CPU");
    const int64_t n = packed_outputs(p[0]);
    if (p[2].numel()) layer_detail::check_param(p[2], dt, n, who, 2);
    TORCH_CHECK(panels_from >= 1 && outputs >= 1 && outputs <= n && n - outputs < 16, who, ": `", name, "` has ", n,
                " packed outputs, of which ", outputs, " its own, panels from ", panels_from, " rows");
    return PackedRows{p[0], p[1], p[2], panels_from, outputs};
  }

  // suppressed ids as best_tokens takes them: strictly increasing (sorted and distinct if they are not),
  // in [0, vocab)
  static at::Tensor sorted_ids(const at::Tensor& ids, int64_t vocab) {
    TORCH_CHECK_VALUE(ids.defined() && ids.device().is_cpu() && ids.scalar_type() == at::kLong && ids.dim() == 1,
                      "NatFirstPass: `suppressed` must be a (n,) int64 CPU tensor");
    at::Tensor c = ids.contiguous();
    for (int64_t i = 1; i < c.numel(); ++i)
      if (c.data_ptr<int64_t>()[i] <= c.data_ptr<int64_t>()[i - 1]) {
        c = std::get<0>(at::_unique(c, /*sorted=*/true));
        break;
      }
    const int64_t n = c.numel(), *p = c.data_ptr<int64_t>();
    TORCH_CHECK_VALUE(n == 0 || (p[0] >= 0 && p[n - 1] < vocab), "NatFirstPass: `suppressed` ids must be in [0, ",
                      vocab, "), got ", c);
    return c;
  }

  at::Tensor src_, pos_;
  std::vector<std::vector<at::Tensor>> enc_;
  std::vector<at::Tensor> enc_norm_;
  std::vector<std::vector<at::Tensor>> dec_;
  std::vector<at::Tensor> dec_norm_;
  double norm_eps_;
  int64_t heads_;
  bool norm_first_;
  int64_t act_;
  double eps_, scale_;
  int64_t offset_;
  PackedRows length_, kv_, out_;
  at::Tensor mask_;
  int64_t max_rows_;
};

}  // namespace attnkit_ops
