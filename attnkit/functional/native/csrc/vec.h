// The portable vector layer every native kernel is written over: V, 16 float32 lanes, and M, a mask of 16
// lanes, with the few operations the kernels use. One source, compiled once per instruction-set variant
// (functional/native/isa.py picks the variant at run time and passes its flags):
//   AVX-512 (-mavx512f/bw/dq/vl): V is one zmm, M a __mmask16;
//   AVX2 + FMA:                   V is two ymm, M two ymm of all-ones / all-zeros lanes;
//   NEON (aarch64):               V is four q registers, M four uint32x4;
//   generic:                      V is 16 floats in an array (the compiler vectorises what it can).
// The logical width is 16 on every variant, so the kernels' data layouts (blocks and panels of 16) are the
// same everywhere; what differs is how many V fit in the registers (kVRegs), which sizes the register tiles.
// Every variant is built under its own namespace (ATTNKIT_VARIANT, set by the build), so two variants
// loaded in one process never share a symbol or a type.
#pragma once

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define ATTNKIT_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__)
#define ATTNKIT_AVX2 1
#include <immintrin.h>
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define ATTNKIT_NEON 1
#include <arm_neon.h>
#else
#define ATTNKIT_GENERIC 1
#if defined(__x86_64__)
#include <xmmintrin.h>  // _mm_prefetch (SSE, x86-64's baseline)
#endif
#endif

#ifndef ATTNKIT_VARIANT
#error "ATTNKIT_VARIANT (the variant's namespace) is set by the build: functional/native/__init__.py"
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

namespace ATTNKIT_VARIANT {
namespace attnkit_simd {

#if ATTNKIT_AVX512
constexpr int kVRegs = 32;  // V values that fit in the vector registers
struct V { __m512 v; };
using M = __mmask16;
#elif ATTNKIT_AVX2
constexpr int kVRegs = 8;
struct V { __m256 a, b; };
struct M { __m256 a, b; };
#elif ATTNKIT_NEON
constexpr int kVRegs = 8;
struct V { float32x4_t p[4]; };
struct M { uint32x4_t p[4]; };
#else
constexpr int kVRegs = 4;
struct V { float f[16]; };
struct M { bool f[16]; };
#endif
constexpr bool kWide = kVRegs >= 32;  // register tiles of the AVX-512 size

// ---- arithmetic ----------------------------------------------------------------------------------
#if ATTNKIT_AVX512
inline V zero() { return {_mm512_setzero_ps()}; }
inline V set1(float x) { return {_mm512_set1_ps(x)}; }
inline V loadu(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void storeu(float* p, V x) { _mm512_storeu_ps(p, x.v); }
inline V operator+(V x, V y) { return {_mm512_add_ps(x.v, y.v)}; }
inline V operator-(V x, V y) { return {_mm512_sub_ps(x.v, y.v)}; }
inline V operator*(V x, V y) { return {_mm512_mul_ps(x.v, y.v)}; }
inline V operator/(V x, V y) { return {_mm512_div_ps(x.v, y.v)}; }
inline V fmadd(V x, V y, V z) { return {_mm512_fmadd_ps(x.v, y.v, z.v)}; }  // x y + z
inline V max(V x, V y) { return {_mm512_max_ps(x.v, y.v)}; }  // y when either is NaN (so max(c, NaN) is NaN)
inline V abs(V x) { return {_mm512_abs_ps(x.v)}; }
inline V round(V x) { return {_mm512_roundscale_ps(x.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
inline float reduce_add(V x) { return _mm512_reduce_add_ps(x.v); }
inline float reduce_max(V x) { return _mm512_reduce_max_ps(x.v); }
#elif ATTNKIT_AVX2
inline V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
inline V loadu(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void storeu(float* p, V x) { _mm256_storeu_ps(p, x.a), _mm256_storeu_ps(p + 8, x.b); }
inline V operator+(V x, V y) { return {_mm256_add_ps(x.a, y.a), _mm256_add_ps(x.b, y.b)}; }
inline V operator-(V x, V y) { return {_mm256_sub_ps(x.a, y.a), _mm256_sub_ps(x.b, y.b)}; }
inline V operator*(V x, V y) { return {_mm256_mul_ps(x.a, y.a), _mm256_mul_ps(x.b, y.b)}; }
inline V operator/(V x, V y) { return {_mm256_div_ps(x.a, y.a), _mm256_div_ps(x.b, y.b)}; }
inline V fmadd(V x, V y, V z) { return {_mm256_fmadd_ps(x.a, y.a, z.a), _mm256_fmadd_ps(x.b, y.b, z.b)}; }
inline V max(V x, V y) { return {_mm256_max_ps(x.a, y.a), _mm256_max_ps(x.b, y.b)}; }
inline V abs(V x) {
  const __m256 m = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  return {_mm256_and_ps(x.a, m), _mm256_and_ps(x.b, m)};
}
inline V round(V x) {
  constexpr int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return {_mm256_round_ps(x.a, r), _mm256_round_ps(x.b, r)};
}
inline float hsum8(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float reduce_add(V x) { return hsum8(_mm256_add_ps(x.a, x.b)); }
inline float reduce_max(V x) {
  __m256 m = _mm256_max_ps(x.a, x.b);
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
#elif ATTNKIT_NEON
#define ATTNKIT_EACH(expr) V r; for (int i = 0; i < 4; ++i) r.p[i] = (expr); return r
inline V zero() { ATTNKIT_EACH(vdupq_n_f32(0.0f)); }
inline V set1(float x) { ATTNKIT_EACH(vdupq_n_f32(x)); }
inline V loadu(const float* p) { ATTNKIT_EACH(vld1q_f32(p + 4 * i)); }
inline void storeu(float* p, V x) { for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, x.p[i]); }
inline V operator+(V x, V y) { ATTNKIT_EACH(vaddq_f32(x.p[i], y.p[i])); }
inline V operator-(V x, V y) { ATTNKIT_EACH(vsubq_f32(x.p[i], y.p[i])); }
inline V operator*(V x, V y) { ATTNKIT_EACH(vmulq_f32(x.p[i], y.p[i])); }
inline V operator/(V x, V y) { ATTNKIT_EACH(vdivq_f32(x.p[i], y.p[i])); }
inline V fmadd(V x, V y, V z) { ATTNKIT_EACH(vfmaq_f32(z.p[i], x.p[i], y.p[i])); }
inline V max(V x, V y) {  // y when either is NaN, as the x86 variants
  ATTNKIT_EACH(vbslq_f32(vcgtq_f32(x.p[i], y.p[i]), x.p[i], y.p[i]));
}
inline V abs(V x) { ATTNKIT_EACH(vabsq_f32(x.p[i])); }
inline V round(V x) { ATTNKIT_EACH(vrndnq_f32(x.p[i])); }
inline float reduce_add(V x) { return vaddvq_f32(vaddq_f32(vaddq_f32(x.p[0], x.p[1]), vaddq_f32(x.p[2], x.p[3]))); }
inline float reduce_max(V x) { return vmaxvq_f32(vmaxq_f32(vmaxq_f32(x.p[0], x.p[1]), vmaxq_f32(x.p[2], x.p[3]))); }
#undef ATTNKIT_EACH
#else
#define ATTNKIT_EACH(expr) V r; for (int i = 0; i < 16; ++i) r.f[i] = (expr); return r
inline V zero() { ATTNKIT_EACH(0.0f); }
inline V set1(float x) { ATTNKIT_EACH(x); }
inline V loadu(const float* p) { ATTNKIT_EACH(p[i]); }
inline void storeu(float* p, V x) { for (int i = 0; i < 16; ++i) p[i] = x.f[i]; }
inline V operator+(V x, V y) { ATTNKIT_EACH(x.f[i] + y.f[i]); }
inline V operator-(V x, V y) { ATTNKIT_EACH(x.f[i] - y.f[i]); }
inline V operator*(V x, V y) { ATTNKIT_EACH(x.f[i] * y.f[i]); }
inline V operator/(V x, V y) { ATTNKIT_EACH(x.f[i] / y.f[i]); }
inline V fmadd(V x, V y, V z) { ATTNKIT_EACH(std::fma(x.f[i], y.f[i], z.f[i])); }
inline V max(V x, V y) { ATTNKIT_EACH(x.f[i] > y.f[i] ? x.f[i] : y.f[i]); }  // y when either is NaN
inline V abs(V x) { ATTNKIT_EACH(std::fabs(x.f[i])); }
inline V round(V x) { ATTNKIT_EACH(std::nearbyint(x.f[i])); }
inline float reduce_add(V x) {  // pairwise, as the vector variants add
  float s[8];
  for (int i = 0; i < 8; ++i) s[i] = x.f[i] + x.f[i + 8];
  return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}
inline float reduce_max(V x) {
  float m = x.f[0];
  for (int i = 1; i < 16; ++i) m = x.f[i] > m ? x.f[i] : m;
  return m;
}
#undef ATTNKIT_EACH
#endif
#if ATTNKIT_AVX512
inline V fmsub(V x, V y, V z) { return {_mm512_fmsub_ps(x.v, y.v, z.v)}; }  // x y - z
inline V fnmadd(V x, V y, V z) { return {_mm512_fnmadd_ps(x.v, y.v, z.v)}; }  // z - x y
#elif ATTNKIT_AVX2
inline V fmsub(V x, V y, V z) { return {_mm256_fmsub_ps(x.a, y.a, z.a), _mm256_fmsub_ps(x.b, y.b, z.b)}; }
inline V fnmadd(V x, V y, V z) { return {_mm256_fnmadd_ps(x.a, y.a, z.a), _mm256_fnmadd_ps(x.b, y.b, z.b)}; }
#else
inline V fmsub(V x, V y, V z) { return fmadd(x, y, zero() - z); }  // x y - z
inline V fnmadd(V x, V y, V z) { return fmadd(zero() - x, y, z); }  // z - x y
#endif

// ---- masks ---------------------------------------------------------------------------------------
// lt, gt, eq: ordered (false where either is NaN); neq ordered too; unord: either is NaN.
#if ATTNKIT_AVX512
inline M lt(V x, V y) { return _mm512_cmp_ps_mask(x.v, y.v, _CMP_LT_OQ); }
inline M gt(V x, V y) { return _mm512_cmp_ps_mask(x.v, y.v, _CMP_GT_OQ); }
inline M eq(V x, V y) { return _mm512_cmp_ps_mask(x.v, y.v, _CMP_EQ_OQ); }
inline M neq(V x, V y) { return _mm512_cmp_ps_mask(x.v, y.v, _CMP_NEQ_OQ); }
inline M unord(V x, V y) { return _mm512_cmp_ps_mask(x.v, y.v, _CMP_UNORD_Q); }
inline M from_bits(uint32_t bits) { return static_cast<__mmask16>(bits); }
inline uint32_t bits(M m) { return m; }
inline V select(M m, V yes, V no) { return {_mm512_mask_blend_ps(m, no.v, yes.v)}; }
inline V zero_unless(M m, V x) { return {_mm512_maskz_mov_ps(m, x.v)}; }
inline M all_lanes() { return 0xFFFF; }
#else
#if ATTNKIT_AVX2
inline M lt(V x, V y) { return {_mm256_cmp_ps(x.a, y.a, _CMP_LT_OQ), _mm256_cmp_ps(x.b, y.b, _CMP_LT_OQ)}; }
inline M gt(V x, V y) { return {_mm256_cmp_ps(x.a, y.a, _CMP_GT_OQ), _mm256_cmp_ps(x.b, y.b, _CMP_GT_OQ)}; }
inline M eq(V x, V y) { return {_mm256_cmp_ps(x.a, y.a, _CMP_EQ_OQ), _mm256_cmp_ps(x.b, y.b, _CMP_EQ_OQ)}; }
inline M neq(V x, V y) { return {_mm256_cmp_ps(x.a, y.a, _CMP_NEQ_OQ), _mm256_cmp_ps(x.b, y.b, _CMP_NEQ_OQ)}; }
inline M unord(V x, V y) { return {_mm256_cmp_ps(x.a, y.a, _CMP_UNORD_Q), _mm256_cmp_ps(x.b, y.b, _CMP_UNORD_Q)}; }
inline M operator&(M x, M y) { return {_mm256_and_ps(x.a, y.a), _mm256_and_ps(x.b, y.b)}; }
inline M operator|(M x, M y) { return {_mm256_or_ps(x.a, y.a), _mm256_or_ps(x.b, y.b)}; }
inline uint32_t bits(M m) {
  return static_cast<uint32_t>(_mm256_movemask_ps(m.a)) | (static_cast<uint32_t>(_mm256_movemask_ps(m.b)) << 8);
}
inline M from_bits(uint32_t bits) {
  const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256i lo = _mm256_set1_epi32(static_cast<int>(bits & 0xFF)), hi = _mm256_set1_epi32(static_cast<int>(bits >> 8));
  return {_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(lo, lane), lane)),
          _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(hi, lane), lane))};
}
inline V select(M m, V yes, V no) { return {_mm256_blendv_ps(no.a, yes.a, m.a), _mm256_blendv_ps(no.b, yes.b, m.b)}; }
inline V zero_unless(M m, V x) { return {_mm256_and_ps(m.a, x.a), _mm256_and_ps(m.b, x.b)}; }
#elif ATTNKIT_NEON
#define ATTNKIT_MASK(expr) M r; for (int i = 0; i < 4; ++i) r.p[i] = (expr); return r
inline M lt(V x, V y) { ATTNKIT_MASK(vcltq_f32(x.p[i], y.p[i])); }
inline M gt(V x, V y) { ATTNKIT_MASK(vcgtq_f32(x.p[i], y.p[i])); }
inline M eq(V x, V y) { ATTNKIT_MASK(vceqq_f32(x.p[i], y.p[i])); }
inline M neq(V x, V y) { ATTNKIT_MASK(vorrq_u32(vcltq_f32(x.p[i], y.p[i]), vcgtq_f32(x.p[i], y.p[i]))); }
inline M unord(V x, V y) { ATTNKIT_MASK(vmvnq_u32(vandq_u32(vceqq_f32(x.p[i], x.p[i]), vceqq_f32(y.p[i], y.p[i])))); }
inline M operator&(M x, M y) { ATTNKIT_MASK(vandq_u32(x.p[i], y.p[i])); }
inline M operator|(M x, M y) { ATTNKIT_MASK(vorrq_u32(x.p[i], y.p[i])); }
inline uint32_t bits(M m) {
  uint32_t b = 0, w[16];
  for (int i = 0; i < 4; ++i) vst1q_u32(w + 4 * i, m.p[i]);
  for (int i = 0; i < 16; ++i) b |= (w[i] ? 1u : 0u) << i;
  return b;
}
inline M from_bits(uint32_t bits) {
  const uint32_t one[4] = {1, 2, 4, 8};
  const uint32x4_t lane = vld1q_u32(one);
  ATTNKIT_MASK(vtstq_u32(vdupq_n_u32((bits >> (4 * i)) & 0xF), lane));
}
inline V select(M m, V yes, V no) {
  V r;
  for (int i = 0; i < 4; ++i) r.p[i] = vbslq_f32(m.p[i], yes.p[i], no.p[i]);
  return r;
}
#undef ATTNKIT_MASK
#else
#define ATTNKIT_MASK(expr) M r; for (int i = 0; i < 16; ++i) r.f[i] = (expr); return r
inline M lt(V x, V y) { ATTNKIT_MASK(x.f[i] < y.f[i]); }
inline M gt(V x, V y) { ATTNKIT_MASK(x.f[i] > y.f[i]); }
inline M eq(V x, V y) { ATTNKIT_MASK(x.f[i] == y.f[i]); }
inline M neq(V x, V y) { ATTNKIT_MASK(x.f[i] < y.f[i] || x.f[i] > y.f[i]); }
inline M unord(V x, V y) { ATTNKIT_MASK(x.f[i] != x.f[i] || y.f[i] != y.f[i]); }
inline M operator&(M x, M y) { ATTNKIT_MASK(x.f[i] && y.f[i]); }
inline M operator|(M x, M y) { ATTNKIT_MASK(x.f[i] || y.f[i]); }
inline uint32_t bits(M m) {
  uint32_t b = 0;
  for (int i = 0; i < 16; ++i) b |= (m.f[i] ? 1u : 0u) << i;
  return b;
}
inline M from_bits(uint32_t bits) { ATTNKIT_MASK(((bits >> i) & 1u) != 0); }
inline V select(M m, V yes, V no) {
  V r;
  for (int i = 0; i < 16; ++i) r.f[i] = m.f[i] ? yes.f[i] : no.f[i];
  return r;
}
#undef ATTNKIT_MASK
#endif
#if !ATTNKIT_AVX2
inline V zero_unless(M m, V x) { return select(m, x, zero()); }
#endif
inline M all_lanes() { return from_bits(0xFFFF); }
#endif
inline bool any(M m) { return bits(m) != 0; }

// The lanes i with lo <= i <= hi (none where hi < lo); first_lanes(n): lanes 0 .. n - 1.
inline M lane_range(int64_t lo, int64_t hi) {
  lo = std::max<int64_t>(lo, 0);
  hi = std::min<int64_t>(hi, 15);
  if (hi < lo) return from_bits(0);
  return from_bits(((1u << (hi + 1)) - 1u) & ~((1u << lo) - 1u));
}
inline M first_lanes(int64_t n) { return lane_range(0, n - 1); }

// ---- transpose -----------------------------------------------------------------------------------
// r[i] lane j <-> r[j] lane i, 16 x 16 lanes moved as bits (any 32-bit words: floats, bfloat16 pairs).
#if ATTNKIT_AVX512
inline void transpose16(V (&r)[16]) {
  __m512i u[16], t[16];
  for (int i = 0; i < 16; ++i) u[i] = _mm512_castps_si512(r[i].v);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(u[i], u[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(u[i], u[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {  // u[g + c], 128-bit lane l: column 4 l + c of rows g .. g + 3
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // 4 x 4 transpose of 128-bit lanes across u[c], u[4 + c], u[8 + c], u[12 + c]
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    t[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    t[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
  for (int i = 0; i < 16; ++i) r[i].v = _mm512_castsi512_ps(t[i]);
}
#elif ATTNKIT_AVX2
inline void transpose8(__m256 (&r)[8]) {  // the 8 x 8 transpose of ymm rows
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);  // rows i, i+1 interleaved: columns 0, 1 | 4, 5
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // columns 2, 3 | 6, 7
  }
  for (int g = 0; g < 8; g += 4) {  // s[g + c]: column c | c + 4 of rows g .. g + 3
    s[g] = _mm256_shuffle_ps(t[g], t[g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
    r[c + 4] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
  }
}
inline void transpose16(V (&r)[16]) {  // four 8 x 8 blocks: rows 0-7 / 8-15 x lanes 0-7 (a) / 8-15 (b)
  __m256 q[4][8];
  for (int i = 0; i < 8; ++i) q[0][i] = r[i].a, q[1][i] = r[i].b, q[2][i] = r[8 + i].a, q[3][i] = r[8 + i].b;
  for (auto& block : q) transpose8(block);
  for (int c = 0; c < 8; ++c) r[c] = {q[0][c], q[2][c]}, r[8 + c] = {q[1][c], q[3][c]};
}
#else
inline void transpose16(V (&r)[16]) {
  alignas(64) uint32_t w[16][16];
  for (int i = 0; i < 16; ++i) std::memcpy(w[i], &r[i], 64);
  for (int i = 0; i < 16; ++i)
    for (int j = i + 1; j < 16; ++j) std::swap(w[i][j], w[j][i]);
  for (int i = 0; i < 16; ++i) std::memcpy(&r[i], w[i], 64);
}
#endif

// ---- exp -----------------------------------------------------------------------------------------
// exp(x) for x <= 0 (and -inf -> 0): Cody-Waite range reduction, degree-6 polynomial, times 2^n. NaN stays
// NaN (max returns its second operand when either is NaN), so a NaN score is never turned into a weight.
// Below -87.3 (where 2^n leaves the normal floats) the result is 0; AVX-512 scales into the subnormals.
inline V pow2n(V p, V n) {
#if ATTNKIT_AVX512
  return {_mm512_scalef_ps(p.v, n.v)};
#else
  alignas(64) float pf[16], nf[16];
  storeu(pf, p), storeu(nf, n);
  for (int i = 0; i < 16; ++i) {
    const int32_t e = nf[i] == nf[i] ? static_cast<int32_t>(nf[i]) + 127 : 0;  // (a NaN p stays NaN)  // n in [-126, 0] here: a normal power of two
    uint32_t u = static_cast<uint32_t>(std::max(e, 0)) << 23;
    float s;
    std::memcpy(&s, &u, 4);
    pf[i] = pf[i] * s;
  }
  return loadu(pf);
#endif
}

inline V exp_ps(V x) {
  const V log2e = set1(1.44269504088896341f), ln2_hi = set1(0.693359375f), ln2_lo = set1(-2.12194440e-4f);
#if ATTNKIT_AVX512
  x = max(set1(-104.0f), x);  // exp(-104) underflows to 0 after scalef
#else
  const M tiny = lt(x, set1(-87.3f));
  x = max(set1(-87.3f), x);
#endif
  const V n = round(x * log2e);
  V r = fnmadd(n, ln2_hi, x);
  r = fnmadd(n, ln2_lo, r);
  V p = set1(1.9875691500e-4f);
  p = fmadd(p, r, set1(1.3981999507e-3f));
  p = fmadd(p, r, set1(8.3334519073e-3f));
  p = fmadd(p, r, set1(4.1665795894e-2f));
  p = fmadd(p, r, set1(1.6666665459e-1f));
  p = fmadd(p, r, set1(5.0000001201e-1f));
  p = fmadd(p, r * r, r + set1(1.0f));
#if ATTNKIT_AVX512
  return pow2n(p, n);
#elif ATTNKIT_AVX2
  // 2^n through the exponent bits: n in [-126, 0] after the clamp
  const __m256i ea = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.a), _mm256_set1_epi32(127)), 23);
  const __m256i eb = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.b), _mm256_set1_epi32(127)), 23);
  const V y = {_mm256_mul_ps(p.a, _mm256_castsi256_ps(ea)), _mm256_mul_ps(p.b, _mm256_castsi256_ps(eb))};
  return select(tiny, zero(), y);
#else
  return select(tiny, zero(), pow2n(p, n));
#endif
}

}  // namespace attnkit_simd
}  // namespace ATTNKIT_VARIANT

#include "vec_mem.h"
#include "vec_int8.h"
