// The kernels' cores against plain loops, without torch: what tests/functional/native/test_cross.py compiles for
// aarch64 (the NEON variant of csrc/vec.h) and runs under qemu-user, and for this machine's variants. Prints one
// line per kernel with its largest error and exits 1 if any is past its tolerance.
//   g++ -O2 -DATTNKIT_VARIANT=attnkit_neon -I attnkit/functional/native/csrc kernel_check.cpp
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "add_norm.h"
#include "int8_linear.h"
#include "panel_linear.h"
#include "short_attention.h"
#include "small_linear.h"
#include "window_attention.h"

namespace k = ATTNKIT_VARIANT;
using Vec = std::vector<float>;

static std::mt19937 rng(0);
static Vec randn(size_t n) {
  std::normal_distribution<float> d;
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
static int failures = 0;
namespace kl = k::attnkit_linear;
static void report(const char* what, double err, double tol) {
  std::printf("%-14s max error %.3g (tolerance %.3g)%s\n", what, err, tol, err <= tol ? "" : "  FAILED");
  if (!(err <= tol)) ++failures;
}

// softmax(scale q k^T) v over keys [lo, hi) for one query row
static void attend_ref(const float* q, const float* kk, const float* v, int d, int dv, int lo, int hi, float scale,
                       float* out) {
  std::vector<double> s(hi > lo ? hi - lo : 0);
  double mx = -INFINITY, sum = 0;
  for (int j = lo; j < hi; ++j) {
    double a = 0;
    for (int e = 0; e < d; ++e) a += double(q[e]) * kk[j * d + e];
    s[j - lo] = a * scale;
    mx = std::max(mx, s[j - lo]);
  }
  for (auto& x : s) sum += (x = std::exp(x - mx));
  for (int c = 0; c < dv; ++c) {
    double o = 0;
    for (int j = lo; j < hi; ++j) o += s[j - lo] / sum * v[j * dv + c];
    out[c] = hi > lo ? float(o) : 0.0f;
  }
}

// the int8 sums with the fast dot products (VNNI, sdot): a function under their target, as int8_ops.h's
template <typename F>
ATTNKIT_FAST_DOT __attribute__((flatten)) void fast_sums(const int8_t* a, const int8_t* b, const int8_t* blocked,
                                                          const int8_t* panels, int mp, int kp, int np, F&& compare) {
  using D = k::attnkit_simd::DotFast;
  std::vector<int32_t> out(mp * np);
  kl::blocked_sums_i8<D>(a, b, blocked, 3, kp, 0, np, out.data());
  compare(3, D::kOffset, out);
  kl::panel_sums_i8<D>(a, b, panels, mp, kp, 0, np, out.data());
  compare(mp, D::kOffset, out);
}

int main() {
  {  // LayerNorm of a residual sum
    const int rows = 5, d = 80;
    Vec x = randn(rows * d), r = randn(rows * d), w = randn(d), b = randn(d), out(rows * d), y(d);
    k::attnkit_norm::add_norm_rows<float>(x.data(), r.data(), w.data(), b.data(), out.data(), 0, rows, d, 1e-5f,
                                          y.data(), false);
    double err = 0;
    for (int i = 0; i < rows; ++i) {
      double m = 0, var = 0;
      for (int j = 0; j < d; ++j) m += x[i * d + j] + r[i * d + j];
      m /= d;
      for (int j = 0; j < d; ++j) var += std::pow(x[i * d + j] + r[i * d + j] - m, 2);
      const double rs = 1 / std::sqrt(var / d + 1e-5);
      for (int j = 0; j < d; ++j)
        err = std::max(err, std::abs((x[i * d + j] + r[i * d + j] - m) * rs * w[j] + b[j] - out[i * d + j]));
    }
    report("add_norm", err, 1e-4);
  }
  {  // linear layers: blocked rows (GELU) and panels, against the plain product
    const int m = 3, n = 48, kk = 64, mp = 9;
    Vec x = randn(mp * kk), w = randn(n * kk), bias = randn(n), out(m * n), sums(mp * n), blocked(n * kk), panels(n * kk);
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < kk; ++j) {
        blocked[(r / 4) * 4 * kk + (j / 16) * 64 + (r % 4) * 16 + j % 16] = w[r * kk + j];
        panels[(r / 16) * 16 * kk + j * 16 + r % 16] = w[r * kk + j];
      }
    k::attnkit_linear::small_linear_cols<float, float, true>(x.data(), blocked.data(), bias.data(), nullptr,
                                                             out.data(), m, n, kk, 0, n, k::attnkit_linear::kGelu,
                                                             sums.data());
    k::attnkit_linear::panel_sums<float>(x.data(), panels.data(), mp, kk, 0, n, sums.data());
    double e1 = 0, e2 = 0;
    for (int i = 0; i < mp; ++i)
      for (int r = 0; r < n; ++r) {
        double a = 0;
        for (int j = 0; j < kk; ++j) a += double(x[i * kk + j]) * w[r * kk + j];
        e2 = std::max(e2, std::abs(a - sums[i * n + r]));
        if (i < m) {
          const double y = a + bias[r], g = 0.5 * y * (1 + std::erf(y / std::sqrt(2.0)));
          e1 = std::max(e1, std::abs(g - out[i * n + r]));
        }
      }
    report("small_linear", e1, 1e-3);
    report("panel_sums", e2, 1e-3);
  }
  {  // int8: rows quantised with outlier channels, then the exact integer sums, blocked and in panels, with
     // the variant's dot products and (where the CPU has them) the fast ones; K and N not multiples of 64 / 16
    const int kk = 100, kp = 128, n = 20, np = 32, mp = 7, count = 3;
    Vec x = randn(mp * kk);
    x[2 * kk + 5] = 40.0f, x[4 * kk + 70] = -60.0f;  // two channels far larger than the rest
    std::uniform_int_distribution<int> u(-127, 127);
    std::vector<int8_t> q(np * kk, 0), blocked(np * kp, 0), panels(np * kp, 0), a(mp * kp), b(mp * kp), bf(mp * kp);
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < kk; ++j) q[r * kk + j] = static_cast<int8_t>(u(rng));
    for (int r = 0; r < n; ++r) q[r * kk] = 127, q[r * kk + 1] = -127;  // the extreme products
    for (int r = 0; r < np; ++r)
      for (int j = 0; j < kk; ++j) {
        blocked[(r / 4) * 4 * kp + (j / 64) * 256 + (r % 4) * 64 + j % 64] = q[r * kk + j];
        panels[(r / 16) * 16 * kp + (j / 4) * 64 + (r % 16) * 4 + j % 4] = q[r * kk + j];
      }
    Vec amax(kk), s(mp), c(mp), cols(mp * count);
    int64_t idx[count];
    kl::column_amax(x.data(), mp, kk, 0, kk, amax.data());
    kl::top_columns(amax.data(), kk, count, idx);
    using Dot = k::attnkit_simd::Dot;
    using DotFast = k::attnkit_simd::DotFast;
    kl::quantize_rows(x.data(), kk, kp, idx, count, 127.0f, Dot::kPlane, 0, mp, a.data(), b.data(), s.data(), c.data(),
                      cols.data());
    kl::quantize_rows(x.data(), kk, kp, idx, count, 127.0f, DotFast::kPlane, 0, mp, a.data(), bf.data(), s.data(),
                      c.data(), cols.data());
    bool outl = (idx[0] == 70 && idx[1] == 5) && cols[4 * count] == -60.0f - c[4];
    double qerr = 0;  // |a s + c - x| <= s / 2 away from the outliers, a in [-127, 127], both ends reached
    for (int i = 0; i < mp; ++i) {
      int top = 0, bottom = 0;
      for (int j = 0; j < kk; ++j) {
        const bool out = j == idx[0] || j == idx[1] || j == idx[2];
        const double e = out ? std::abs(double(a[i * kp + j]))
                             : std::abs(a[i * kp + j] * double(s[i]) + c[i] - x[i * kk + j]);
        qerr = std::max(qerr, out ? e : e / s[i] - 0.5);
        top = std::max(top, int(a[i * kp + j])), bottom = std::min(bottom, int(a[i * kp + j]));
      }
      outl = outl && top == 127 && bottom == -127;
    }
    report("int8_quant", outl ? std::max(qerr, 0.0) : 1.0, 1e-5);
    std::vector<int32_t> want(mp * np, 0), got(mp * np);
    for (int i = 0; i < mp; ++i)
      for (int r = 0; r < np; ++r)
        for (int j = 0; j < kk; ++j) want[i * np + r] += int32_t(a[i * kp + j]) * q[r * kk + j];
    double err = 0;
    const auto compare = [&](int rows, bool offset, const std::vector<int32_t>& sum) {
      for (int i = 0; i < rows; ++i)
        for (int r = 0; r < np; ++r) {
          int32_t off = 0;
          for (int j = 0; offset && j < kk; ++j) off += 128 * q[r * kk + j];
          err = std::max(err, std::abs(double(sum[i * np + r] - off) - want[i * np + r]));
        }
    };
    kl::blocked_sums_i8<Dot>(a.data(), b.data(), blocked.data(), 3, kp, 0, np, got.data());
    compare(3, false, got);
    kl::panel_sums_i8<Dot>(a.data(), b.data(), panels.data(), mp, kp, 0, np, got.data());
    compare(mp, false, got);
    report("int8_sums", err, 0);
    if (k::attnkit_simd::kFastDot && k::attnkit_simd::cpu_has_fast_dot()) {
      err = 0;
      fast_sums(a.data(), bf.data(), blocked.data(), panels.data(), mp, kp, np, compare);
      report("int8_fast", err, 0);
    } else {
      report("int8_fast", 0, 0);  // (no such instructions here)
    }
  }
  {  // full attention over a short sequence, padded to nk keys
    const int nq = 7, lk = 21, nk = 17, d = 32, dv = 16;
    Vec q = randn(nq * d), kk = randn(lk * d), v = randn(lk * dv), out(nq * dv), want(dv);
    k::attnkit_short::Scratch w(d, dv, 32);
    k::attnkit_short::Seq<float> a{q.data(), kk.data(), v.data(), out.data(), d, d, dv, dv, nq, nk};
    k::attnkit_short::attend<float>(a, d, dv, 0.25f, w);
    double err = 0;
    for (int i = 0; i < nq; ++i) {
      attend_ref(q.data() + i * d, kk.data(), v.data(), d, dv, 0, nk, 0.25f, want.data());
      for (int c = 0; c < dv; ++c) err = std::max(err, std::abs(double(want[c]) - out[i * dv + c]));
    }
    report("short", err, 1e-5);
  }
  {  // attention over a window of keys (2 left, 3 right), one tile of 16 queries, a partial group of 12 columns
    const int lq = 16, lk = 16, d = 16, dv = 12, left = 2, right = 3;
    Vec q = randn(lq * d), kk = randn(lk * d), v = randn(lk * dv), out(lq * dv), lse(lq), want(dv);
    Vec buf((left + right + 16) * 16), qt(d * 16), obuf(16 * dv);
    k::attnkit_window::Tile<float> a{q.data(), kk.data(), v.data(), out.data(), lse.data(), d, d, dv, dv, lq, lk, 0,
                                     left, right, d, dv, 0.5f};
    k::attnkit_window::tile<float>(a, 0, buf.data(), qt.data(), obuf.data());
    double err = 0;
    for (int i = 0; i < lq; ++i) {
      attend_ref(q.data() + i * d, kk.data(), v.data(), d, dv, std::max(0, i - left), std::min(lk, i + right + 1),
                 0.5f, want.data());
      for (int c = 0; c < dv; ++c) err = std::max(err, std::abs(double(want[c]) - out[i * dv + c]));
    }
    report("window", err, 1e-5);
  }
  {  // exp at the edges: -inf -> 0, NaN stays NaN, 0 -> 1
    float in[16] = {0.0f, -1.0f, -10.0f, -87.0f, -100.0f, -INFINITY, NAN, -0.5f, -2.0f, -3.0f, -4.0f, -5.0f,
                    -20.0f, -30.0f, -40.0f, -50.0f};
    float got[16];
    k::attnkit_simd::storeu(got, k::attnkit_simd::exp_ps(k::attnkit_simd::loadu(in)));
    double err = 0;  // relative, where exp(x) is a normal float (x > -87; NaN and -inf fail the test)
    for (int i = 0; i < 16; ++i)
      if (in[i] > -87.0f) err = std::max(err, std::abs(got[i] / std::exp(double(in[i])) - 1.0));
    const bool edges = got[5] == 0.0f && std::isnan(got[6]) && got[0] == 1.0f;
    report("exp", edges ? err : 1.0, 1e-6);
  }
  return failures ? 1 : 0;
}
