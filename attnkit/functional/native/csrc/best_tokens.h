// The best allowed token of each row of logits and its log-probability, in one pass over the row plus
// one of exps: what log_softmax, index_fill(suppressed, -inf) and max compute in three (a NAT pass asks
// it of every position: 15 rows x 8,000 words). Included once by module.cpp (and by
// the inference layer's compositions.cpp).
//
//   logp[i] = x[i, t] - log(sum_j exp(x[i, j])),  t = the first j outside `suppressed` with the largest x[i, j]
//
// The softmax runs over every token, suppressed ones included (as log_softmax before index_fill).
// A row this does not decide, one with a NaN or +inf, all -inf, or no allowed token, gets id -1 and
// logp NaN: the caller takes the reference path for it (functional.tokens.best_tokens).
// Logits float32 or bfloat16 (widened as they are loaded); log-probabilities float32.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>

#include "vec.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_tokens {

using namespace attnkit_simd;

// One row of v logits; bad: sorted suppressed ids. Returns the id (-1: undecided) and writes logp.
// Lanes past a stretch's end read nothing and count as -inf.
template <typename S>
inline int64_t best_row(const S* x, int64_t v, const int64_t* bad, int64_t nbad, float& logp) {
  const V ninf = set1(-std::numeric_limits<float>::infinity());
  const V pinf = set1(std::numeric_limits<float>::infinity());
  auto load = [&](int64_t j, int64_t end) {
    const M k = first_lanes(end - j);
    return select(k, load16(x + j, k), ninf);
  };
  // pass 1: the row's max; NaN or +inf anywhere leaves the row undecided
  V mx = ninf;
  M odd = from_bits(0);
  for (int64_t j = 0; j < v; j += 16) {
    const V y = load(j, v);
    odd = odd | unord(y, y) | eq(y, pinf);
    mx = max(mx, y);
  }
  logp = std::numeric_limits<float>::quiet_NaN();
  const float m = reduce_max(mx);
  if (any(odd) || m == -std::numeric_limits<float>::infinity()) return -1;
  // the best allowed: the stretches between suppressed ids, each lane keeping its first largest (its token id
  // as a float: exact below 2^24, and V < 2^31 - 16 is checked at the entry)
  V best = ninf, at = set1(-1.0f);
  alignas(64) float iota[16];
  for (int i = 0; i < 16; ++i) iota[i] = static_cast<float>(i);
  const V lane = loadu(iota);
  int64_t a = 0;
  for (int64_t s = 0; s <= nbad; ++s) {
    const int64_t b = s < nbad ? bad[s] : v;  // allowed: [a, b)
    for (int64_t j = a; j < b; j += 16) {
      const V y = load(j, b);
      const M gt_ = gt(y, best);
      best = select(gt_, y, best);
      at = select(gt_, lane + set1(static_cast<float>(j)), at);
    }
    a = b + 1;
  }
  const float top = reduce_max(best);
  if (top == -std::numeric_limits<float>::infinity()) return -1;  // nothing allowed (or all -inf)
  alignas(64) float bv[16], av[16];
  storeu(bv, best), storeu(av, at);
  double id = -1;
  for (int i = 0; i < 16; ++i)
    if (bv[i] == top && av[i] >= 0 && (id < 0 || av[i] < id)) id = av[i];
  if (id < 0) return -1;
  // pass 2: sum of exp(x - max) over every token
  const V mv = set1(m);
  V sum = zero();
  for (int64_t j = 0; j < v; j += 16) sum = sum + exp_ps(load(j, v) - mv);
  logp = top - m - std::log(reduce_add(sum));
  return static_cast<int64_t>(id);
}

}  // namespace attnkit_tokens
}  // namespace ATTNKIT_VARIANT

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

// logits (M, V) float32 or bfloat16, contiguous; suppressed (n,) int64, strictly increasing, in [0, V)
// -> logp (M,) float32, ids (M,).
inline std::tuple<at::Tensor, at::Tensor> best_tokens(const at::Tensor& logits, const at::Tensor& suppressed) {
  const char* who = "best_tokens";
  TORCH_CHECK(logits.defined() && logits.device().is_cpu() &&
                  (logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kBFloat16) &&
                  logits.dim() == 2 && logits.is_contiguous(),
              who, ": `logits` must be a contiguous (M, V) float32 or bfloat16 CPU tensor");
  TORCH_CHECK(suppressed.defined() && suppressed.device().is_cpu() && suppressed.scalar_type() == at::kLong &&
                  suppressed.dim() == 1 && suppressed.is_contiguous(),
              who, ": `suppressed` must be a contiguous (n,) int64 CPU tensor");
  const int64_t m = logits.size(0), v = logits.size(1), nbad = suppressed.numel();
  TORCH_CHECK(v < (int64_t{1} << 24) - 16, who, ": V=", v, " is too large");
  const int64_t* bad = suppressed.data_ptr<int64_t>();
  for (int64_t s = 0; s < nbad; ++s)
    TORCH_CHECK(bad[s] >= 0 && bad[s] < v && (s == 0 || bad[s] > bad[s - 1]), who,
                ": `suppressed` must be strictly increasing ids in [0, ", v, ")");
  auto logp = at::empty({m}, logits.options().dtype(at::kFloat));
  auto ids = at::empty({m}, logits.options().dtype(at::kLong));
  if (m == 0) return {logp, ids};
  float* lp = logp.data_ptr<float>();
  int64_t* ip = ids.data_ptr<int64_t>();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(v, 1));
  auto go = [&](const auto* x) {
    at::parallel_for(0, m, grain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) ip[i] = attnkit_tokens::best_row(x + i * v, v, bad, nbad, lp[i]);
    });
  };
  if (logits.scalar_type() == at::kFloat)
    go(logits.data_ptr<float>());
  else
    go(reinterpret_cast<const uint16_t*>(logits.data_ptr()));
  return {logp, ids};
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
