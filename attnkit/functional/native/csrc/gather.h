// Rows of a time-major buffer moved in one pass: out[t, i] = src[t, index[i]] for t < n, every trailing
// element of a row copied as bytes (any dtype). The K/V cache's move between beam-search steps
// (inference/cache.py): index_select along dim 1 runs element loops; whole rows by memcpy run at the
// speed of a copy (BENCHMARKS.md, "Generation"). Included once by module.cpp.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {

// src (T, B, ...) and out (T', B', ...) contiguous, one dtype, the same trailing sizes; index (B',) int64 in
// [0, B); n <= min(T, T'). Writes out[:n] and returns out.
inline at::Tensor gather_rows(const at::Tensor& src, const at::Tensor& index, int64_t n, at::Tensor out) {
  const char* who = "gather_rows";
  TORCH_CHECK(src.defined() && out.defined() && index.defined() && src.device().is_cpu() && out.device().is_cpu() &&
                  index.device().is_cpu(), who, ": src, index and out must be CPU tensors");
  TORCH_CHECK(src.dim() >= 2 && out.dim() == src.dim() && src.scalar_type() == out.scalar_type() &&
                  src.is_contiguous() && out.is_contiguous(), who,
              ": src and out must be contiguous (T, B, ...) tensors of one dtype and rank");
  for (int64_t d = 2; d < src.dim(); ++d)
    TORCH_CHECK(src.size(d) == out.size(d), who, ": src and out must have the same trailing sizes");
  TORCH_CHECK(index.scalar_type() == at::kLong && index.dim() == 1 && index.is_contiguous() &&
                  index.numel() == out.size(1), who, ": index must be a contiguous (B',) int64 tensor, B' = out.size(1)");
  TORCH_CHECK(n >= 0 && n <= src.size(0) && n <= out.size(0), who, ": n must be in [0, min(T, T')]");
  const int64_t b = src.size(1), rows = out.size(1);
  const int64_t* ix = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i) TORCH_CHECK(ix[i] >= 0 && ix[i] < b, who, ": index values must be in [0, ", b, ")");
  if (n == 0 || rows == 0) return out;
  const int64_t row_bytes = src.numel() / (src.size(0) * b) * static_cast<int64_t>(src.element_size());
  const char* s = static_cast<const char*>(src.data_ptr());
  char* o = static_cast<char*>(out.data_ptr());
  at::parallel_for(0, n, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(o + (t * rows + i) * row_bytes, s + (t * b + ix[i]) * row_bytes, row_bytes);
  });
  return out;
}

}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
