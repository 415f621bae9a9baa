// A non-autoregressive model's first pass over one unpadded sentence, in one call: what
// NATEngine.first_pass (attnkit/inference/nat.py) runs from Python, its reference, as the same entry points
// in the same order (the same results, bit for bit): here the Python between the calls (a few dozen small
// torch operations) is C++ and ATen. Included once, by compositions.cpp, after layer_forward.h and
// best_tokens.h.
//
//   x      = E_src[ids] + P[:S]                           (1, S, d)   (the table already times sqrt(d))
//   memory = LN_enc(encoder layers(x))                    (1, S, d)   (layers_forward)
//   T      = clamp(argmax(mean_s(memory) W_len + b) + S - m, 1, max_T)   (small_linear)
//            or, a CTC model's row, clamp(ceil(S p / q), 1, max_T)   (no classifier)
//   kv     = memory W_kv + b                              (S, layers 2d): every layer's cross K, V
//   y      = decoder layers(M[:T], kv)                    (1, T, d)   (layers_forward; M: T mask tokens)
//   tokens, logp = best allowed token of LN_dec(y) W_out + b   (small_linear, best_tokens; a call's `shift`
//            added to one token's logit first: CTC's blank penalty)
//
// NatFirstPass holds the weights, checked once when it is made; a call checks the sentence and the
// suppressed ids. A T the decoder layers do not take in one call (more than max_row) returns no tokens:
// the caller continues from the memory and T on its general path.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

// A linear layer as small_linear takes it, chosen by the rows: W blocked and in panels (the panels from
// panels_from rows on), the bias padded to the packed outputs (empty: none); `outputs` the layer's own (the rest
// are padding). Checked when it is made; its inputs are checked by the pass that takes it.
struct PackedRows {
  at::Tensor blocked, panels, bias;
  int64_t panels_from, outputs;

  PackedRows(at::Tensor blocked_, at::Tensor panels_, at::Tensor bias_, int64_t panels_from_, int64_t outputs_)
      : blocked(std::move(blocked_)), panels(std::move(panels_)), bias(std::move(bias_)), panels_from(panels_from_),
        outputs(outputs_) {
    const char* who = "PackedRows";
    TORCH_CHECK(blocked.defined() && panels.defined() && bias.defined(), who,
                ": give W blocked, W in panels and the bias (empty: none)");
    TORCH_CHECK(packed_layout(blocked) == 1 && packed_layout(panels) == 2 &&
                    packed_outputs(blocked) == packed_outputs(panels) &&
                    packed_inputs(blocked) == packed_inputs(panels),
                who, ": `blocked` must be W blocked (N / 4, K / 16, 4, 16) and `panels` the same W in panels");
    const auto dt = blocked.scalar_type();
    for (const auto& w : {blocked, panels})
      TORCH_CHECK(w.scalar_type() == dt && w.is_contiguous() && w.device().is_cpu(), who,
                  ": W must be contiguous, one dtype, on the CPU");
    const int64_t n = packed_outputs(blocked);
    if (bias.numel()) layer_detail::check_param(bias, dt, n, who, 2);
    TORCH_CHECK(panels_from >= 1 && outputs >= 1 && outputs <= n && n - outputs < 16, who, ": ", n,
                " packed outputs, of which ", outputs, " the layer's own, panels from ", panels_from, " rows");
  }

  int64_t inputs() const { return packed_inputs(blocked); }

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
  // encoder, decoder: the layers (LayerStack: the encoder's without, the decoder's with cross-attention, the same
  // settings); src_table (V_src, d); positions (P, d) or empty; mask_rows (1, max_T, d): the decoder's input of
  // max_T mask tokens (T is clamped to [1, max_T]); the final norms (weight, bias) or none, their eps norm_eps;
  // length, cross_kv, output: the length classifier (none for a CTC model), every decoder layer's cross K, V
  // projection, the output layer; ctc_row (p, q): a CTC model's row of ceil(S p / q) positions instead of the
  // classifier's length; max_rows: the longest source, max_row: the longest decoder row, one call takes.
  NatFirstPass(LayerStack encoder, LayerStack decoder, at::Tensor src_table, at::Tensor positions, at::Tensor mask_rows,
               std::optional<TensorPair> encoder_norm, std::optional<TensorPair> decoder_norm, double norm_eps,
               std::optional<PackedRows> length, int64_t length_offset, std::optional<std::pair<int64_t, int64_t>> ctc_row,
               PackedRows cross_kv, PackedRows output, int64_t max_rows, int64_t max_row)
      : enc_(std::move(encoder)), dec_(std::move(decoder)), src_(std::move(src_table)), pos_(std::move(positions)),
        mask_(std::move(mask_rows)), norm_eps_(norm_eps), length_(std::move(length)), ctc_row_(ctc_row),
        kv_(std::move(cross_kv)), out_(std::move(output)), offset_(length_offset), max_rows_(max_rows),
        max_row_(max_row) {
    const char* who = "NatFirstPass";
    const LayerWeights& e = enc_.first();
    const LayerWeights& l = dec_.first();
    TORCH_CHECK(!e.cross, who, ": the encoder's layers must have no cross-attention");
    TORCH_CHECK(l.cross, who, ": the decoder's layers must have cross-attention");
    TORCH_CHECK(e.dtype == l.dtype && e.d == l.d && e.num_heads == l.num_heads && e.act == l.act &&
                    e.norm_first == l.norm_first && e.eps == l.eps && e.scale == l.scale,
                who, ": the encoder's and the decoder's layers must share dtype, d, num_heads, act, norm_first, eps "
                "and scale");
    const auto dt = e.dtype;
    const int64_t d = e.d;
    TORCH_CHECK(src_.defined() && src_.dim() == 2 && src_.size(1) == d && src_.is_contiguous() &&
                    src_.device().is_cpu() && src_.scalar_type() == dt,
                who, ": `src_table` must be a contiguous (V, ", d, ") CPU tensor in the layers' dtype");
    TORCH_CHECK(!pos_.defined() || pos_.numel() == 0 ||
                    (pos_.dim() == 2 && pos_.size(1) == d && pos_.scalar_type() == dt && pos_.device().is_cpu()),
                who, ": `positions` must be (P, ", d, ") in the layers' dtype, on the CPU, or empty");
    const std::pair<const std::optional<TensorPair>*, const char*> norms[] = {{&encoder_norm, "encoder_norm"},
                                                                               {&decoder_norm, "decoder_norm"}};
    for (const auto& [norm, name] : norms) {
      if (!norm->has_value()) continue;
      for (const auto& p : {std::get<0>(**norm), std::get<1>(**norm)})
        TORCH_CHECK(p.defined() && p.device().is_cpu() && p.scalar_type() == dt && p.dim() == 1 && p.size(0) == d &&
                        p.is_contiguous(), who, ": `", name, "` must be (weight, bias), each (", d, ",), contiguous, "
                    "in the layers' dtype, on the CPU, or none");
    }
    if (encoder_norm) enc_norm_ = {std::get<0>(*encoder_norm), std::get<1>(*encoder_norm)};
    if (decoder_norm) dec_norm_ = {std::get<0>(*decoder_norm), std::get<1>(*decoder_norm)};
    const int64_t layers = static_cast<int64_t>(dec_.layers.size());
    TORCH_CHECK(length_.has_value() != ctc_row_.has_value(), who,
                ": give either `length` (the classifier) or `ctc_row` (a CTC model's row), not both or neither");
    TORCH_CHECK(!ctc_row_ || (ctc_row_->first >= 1 && ctc_row_->second >= 1 && ctc_row_->first <= 1000000 &&
                              ctc_row_->second <= 1000000),
                who, ": `ctc_row` must be (p, q), whole numbers in [1, 1000000]");
    std::vector<std::pair<const PackedRows*, const char*>> linears = {{&kv_, "cross_kv"}, {&out_, "output"}};
    if (length_) linears.emplace_back(&*length_, "length");
    for (const auto& [rows, name] : linears)
      TORCH_CHECK(rows->inputs() == d && rows->blocked.scalar_type() == dt, who, ": `", name, "` must take d = ", d,
                  " inputs in the layers' dtype");
    TORCH_CHECK(kv_.outputs == 2 * d * layers, who, ": `cross_kv` must have 2d x decoder layers = ", 2 * d * layers,
                " outputs, got ", kv_.outputs);
    TORCH_CHECK(offset_ >= 0, who, ": `length_offset` must be >= 0");
    TORCH_CHECK(mask_.defined() && mask_.dim() == 3 && mask_.size(0) == 1 && mask_.size(2) == d &&
                    mask_.size(1) >= 1 && mask_.is_contiguous() && mask_.scalar_type() == dt &&
                    mask_.device().is_cpu(),
                who, ": `mask_rows` must be a contiguous (1, max_T, ", d, ") CPU tensor in the layers' dtype");
    TORCH_CHECK(max_rows_ >= 1 && max_row_ >= 1, who, ": `max_rows` and `max_row` must be >= 1");
  }

  // ids (1, S) int64, suppressed (n,) int64 ids in [0, V_out), shift_id (-1: none) and shift: added to that
  // token's logit before the choice -> memory (1, S, d), lengths (1, 1) int64 (the row, for CTC), tokens (1, T)
  // int64 and logp (1, T) float32 (undefined when T > max_row), kv (S, layers 2d).
  using Result = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
  Result operator()(const at::Tensor& ids, const at::Tensor& suppressed, int64_t shift_id, double shift) const {
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
    TORCH_CHECK_VALUE(shift_id >= -1 && shift_id < out_.outputs && std::isfinite(shift), who,
                      ": `shift_id` must be -1 (none) or a token id in [0, ", out_.outputs, ") and `shift` finite, got ",
                      shift_id, " and ", shift);
    // the encoder
    at::Tensor x = at::embedding(src_, ids);  // (1, S, d)
    if (pos_.numel()) x = x + pos_.narrow(0, 0, s);
    std::vector<at::Tensor> none;
    const at::Tensor no_lengths = at::empty({0}, ids.options());
    at::Tensor memory = layers_forward(x, enc_, no_lengths, none, none, no_lengths);
    if (!enc_norm_.empty()) memory = at::layer_norm(memory, {d}, enc_norm_[0], enc_norm_[1], norm_eps_);
    // the length: the classifier's best offset from the mean of the memory, or CTC's row
    int64_t t;
    if (length_) {
      const at::Tensor scores = (*length_)(memory.sum(1) / s);  // (1, 2m + 1)
      const int64_t best = std::get<1>(scores.topk(1, 1)).item<int64_t>();
      t = std::clamp<int64_t>(best + s - offset_, 1, mask_.size(1));
    } else {
      t = std::clamp<int64_t>((s * ctc_row_->first + ctc_row_->second - 1) / ctc_row_->second, 1, mask_.size(1));
    }
    at::Tensor lengths = at::full({1, 1}, t, ids.options());
    // every decoder layer's cross keys and values, then the decoder over T mask tokens
    const at::Tensor kv = kv_(memory.view({s, d}));  // (S, layers 2d)
    if (t > max_row_) return {memory, lengths, at::Tensor(), at::Tensor(), kv};
    const int64_t layers = static_cast<int64_t>(dec_.layers.size()), h = dec_.first().num_heads, dh = d / h;
    // (S, layers 2d) -> (1, S, layers, 2, H, dh) -> (layers, 2, 1, H, S, dh)
    const at::Tensor split = kv.view({1, s, layers, 2, h, dh}).permute({2, 3, 0, 4, 1, 5});
    std::vector<at::Tensor> keys, values;
    for (int64_t l = 0; l < layers; ++l) {
      keys.push_back(split[l][0]);
      values.push_back(split[l][1]);
    }
    const at::Tensor y = layers_forward(mask_.narrow(1, 0, t), dec_, no_lengths, keys, values, no_lengths);
    // the output layer (the decoder's norm inside its call), each position's best allowed token
    const at::Tensor rows = y.view({t, d});
    at::Tensor logits = dec_norm_.empty() ? out_(rows) : out_(rows, dec_norm_[0], dec_norm_[1], norm_eps_);
    logits = logits.contiguous();
    if (shift_id >= 0) logits.select(1, shift_id).add_(shift);
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

  LayerStack enc_, dec_;
  at::Tensor src_, pos_, mask_;
  std::vector<at::Tensor> enc_norm_, dec_norm_;  // (weight, bias), or empty: none
  double norm_eps_;
  std::optional<PackedRows> length_;
  std::optional<std::pair<int64_t, int64_t>> ctc_row_;
  PackedRows kv_, out_;
  int64_t offset_, max_rows_, max_row_;
};

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
