// An int8 linear layer's step inside layer_forward.h's OpenMP region (int8_ops.h's arithmetic, shared by the
// threads): the rows quantised (the outlier channels chosen by one thread, the rows split), a barrier, then each
// thread's outputs. Included once, by layer_forward.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "int8_ops.h"

namespace ATTNKIT_VARIANT {
namespace attnkit_ops {
namespace layer_detail {

// The shared buffers of the int8 layers' inputs (int8_quant.h): the rows quantised and their second plane
// (n x kp int8 each), their scales, shifts and outlier values, the outlier channels and the columns' amax (kmax
// floats).
struct Int8Scratch {
  int8_t *a, *b;
  float *s, *shift, *cols, *amax;
  int64_t kmax;
  int64_t idx[attnkit_linear::kMaxOutliers];
};

// Int8Scratch's memory for n rows of at most kmax inputs (kpmax padded), allocated before the region.
struct Int8Buffers {
  std::unique_ptr<int8_t[]> a8;
  std::unique_ptr<float[]> f8;
  Int8Scratch view{};

  Int8Buffers(int64_t n, int64_t kmax, int64_t kpmax) {
    if (kpmax == 0) return;
    const int64_t per_row = 2 + attnkit_linear::kMaxOutliers;  // s, shift, cols
    a8.reset(new int8_t[2 * n * kpmax]);
    f8 = attnkit_simd::scratch_floats(static_cast<size_t>(n * per_row + kmax));
    float* f = f8.get();
    view = Int8Scratch{a8.get(), a8.get() + n * kpmax, f, f + n, f + 2 * n, f + n * per_row, kmax, {}};
  }
};

// dst = act(x W^T + b) [+ res] for n rows x (float32), this thread's outputs (tid of nt): every thread of the region
// calls it (it holds barriers). sums: this thread's scratch (n x its outputs int32). O: float, or float sums.
template <typename O>
inline void int8_share(const float* x, const Int8Weight& iw, const float* res, O* dst, int64_t a, int64_t n, int tid,
                       int nt, Int8Scratch& i8, float* sums) {
  const int64_t k = iw.inputs(), kp = iw.kp(), nout = iw.padded();
  const int count = static_cast<int>(iw.outliers);
#pragma omp single
  {
    if (count > 0) {
      attnkit_linear::column_amax(x, n, k, 0, k, i8.amax);
      attnkit_linear::top_columns(i8.amax, k, count, i8.idx);
    }
  }
  const int64_t r0 = n * tid / nt, r1 = n * (tid + 1) / nt;
  attnkit_linear::quantize_rows(x, k, kp, i8.idx, count, static_cast<float>(iw.act_max), int8_detail::plane(), r0, r1,
                                i8.a, i8.b, i8.s, i8.shift, i8.cols);
#pragma omp barrier
  const bool panels = iw.panels();
  const int64_t unit = panels ? 32 : 16, units = nout / unit;  // panels in pairs
  const int64_t c0 = units * tid / nt * unit, c1 = tid == nt - 1 ? nout : units * (tid + 1) / nt * unit;
  if (c1 <= c0) return;
  int32_t* s = reinterpret_cast<int32_t*>(sums);
  const bool fast = int8_detail::fast_dot();
  if (fast)
    int8_detail::sums_fast(panels, i8.a, i8.b, iw.w.data_ptr<int8_t>(), n, kp, c0, c1, s);
  else
    int8_detail::sums<attnkit_simd::Dot>(panels, i8.a, i8.b, iw.w.data_ptr<int8_t>(), n, kp, c0, c1, s);
  const attnkit_linear::Int8Epilogue e{i8.s, i8.shift, i8.cols, i8.idx, count, iw.wt.data_ptr<int8_t>(), nout,
                                       iw.scale.data_ptr<float>(), iw.wsum.data_ptr<int32_t>(),
                                       fast && attnkit_simd::DotFast::kOffset, iw.bias.data_ptr<float>()};
  attnkit_linear::epilogue_i8<O>(s, c1 - c0, e, res, dst, n, nout, c0, c1, a);
}

}  // namespace layer_detail
}  // namespace attnkit_ops
}  // namespace ATTNKIT_VARIANT
