// The vector layer's int8 side (csrc/vec.h's V): Q, 64 int8 lanes (V's 64 bytes), and I, 16 int32 lanes (V's
// lanes), with the dot products of int8 groups of four that the int8 linear layers are made of (int8_linear.h):
// lane i of the sums gets x[4i] w[4i] + ... + x[4i+3] w[4i+3]. Both operands are symmetric int8, in [-127, 127]
// (never -128), so every product and every pair of products fits in 16 bits and the int32 sums are exact.
//
// A Dot is one way of computing them, with the instructions of its variant:
//   AVX2:         vpmaddubsw multiplies u8 x s8 and adds pairs into 16 bits, saturating: the sign of x moves
//                 onto w first (|x| as u8, sign(x) w as s8, vpsignb: ggml's trick; |pair| <= 2 127^2 < 2^15),
//                 then vpmaddwd by ones widens the pairs into int32 (|x| comes made, in the rows' second plane);
//   AVX-512:      the same on zmm (no vpsignb there: w negated under x's sign mask);
//   AVX512-VNNI:  DotVnni, vpdpbusd: four u8 x s8 products into int32 in one instruction. x goes in as
//                 x + 128 (u8); the sums then hold 128 sum(w) too, which the epilogue takes off (kOffset);
//   NEON:         widening multiplies (smull, 16-bit pairs, sadalp into int32); DotSdot, sdot (vdotq_s32), where
//                 the CPU has the dot-product extension;
//   generic:      plain int32 loops.
// DotVnni and DotSdot use instructions beyond their variant's flags: only functions that carry ATTNKIT_FAST_DOT
// call them, and only after cpu_has_fast_dot(). Included by vec.h.
#pragma once

#if ATTNKIT_NEON && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace ATTNKIT_VARIANT {
namespace attnkit_simd {

#if ATTNKIT_AVX512
struct Q { __m512i v; };
struct I { __m512i v; };
#elif ATTNKIT_AVX2
struct Q { __m256i a, b; };
struct I { __m256i a, b; };
#elif ATTNKIT_NEON
struct Q { int8x16_t p[4]; };
struct I { int32x4_t p[4]; };
#else
struct Q { int8_t f[64]; };
struct I { int32_t f[16]; };
#endif

// ---- loads, stores, conversions --------------------------------------------------------------------
#if ATTNKIT_AVX512
inline I izero() { return {_mm512_setzero_si512()}; }
inline Q loadq(const int8_t* p) { return {_mm512_loadu_si512(p)}; }
inline Q bcast4(const int8_t* p) {  // p[0..3] in every group of four
  int32_t g;
  std::memcpy(&g, p, 4);
  return {_mm512_set1_epi32(g)};
}
inline I loadi(const int32_t* p) { return {_mm512_loadu_si512(p)}; }
inline void storeu(int32_t* p, I x) { _mm512_storeu_si512(p, x.v); }
inline I operator-(I x, I y) { return {_mm512_sub_epi32(x.v, y.v)}; }
inline int32_t reduce_add(I x) { return _mm512_reduce_add_epi32(x.v); }
inline V to_float(I x) { return {_mm512_cvtepi32_ps(x.v)}; }
inline V load_i8(const int8_t* p) {  // 16 int8 -> 16 floats
  return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
}
#elif ATTNKIT_AVX2
inline I izero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
inline Q loadq(const int8_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
}
inline Q bcast4(const int8_t* p) {
  int32_t g;
  std::memcpy(&g, p, 4);
  const __m256i v = _mm256_set1_epi32(g);
  return {v, v};
}
inline I loadi(const int32_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
}
inline void storeu(int32_t* p, I x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x.a);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), x.b);
}
inline I operator-(I x, I y) { return {_mm256_sub_epi32(x.a, y.a), _mm256_sub_epi32(x.b, y.b)}; }
inline int32_t reduce_add(I x) {
  const __m256i s = _mm256_add_epi32(x.a, x.b);
  __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
  t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
  return _mm_cvtsi128_si32(t);
}
inline V to_float(I x) { return {_mm256_cvtepi32_ps(x.a), _mm256_cvtepi32_ps(x.b)}; }
inline V load_i8(const int8_t* p) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i hi = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8));
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))};
}
#elif ATTNKIT_NEON
inline I izero() {
  I r;
  for (int i = 0; i < 4; ++i) r.p[i] = vdupq_n_s32(0);
  return r;
}
inline Q loadq(const int8_t* p) {
  Q r;
  for (int i = 0; i < 4; ++i) r.p[i] = vld1q_s8(p + 16 * i);
  return r;
}
inline Q bcast4(const int8_t* p) {
  int32_t g;
  std::memcpy(&g, p, 4);
  Q r;
  for (int i = 0; i < 4; ++i) r.p[i] = vreinterpretq_s8_s32(vdupq_n_s32(g));
  return r;
}
inline I loadi(const int32_t* p) {
  I r;
  for (int i = 0; i < 4; ++i) r.p[i] = vld1q_s32(p + 4 * i);
  return r;
}
inline void storeu(int32_t* p, I x) {
  for (int i = 0; i < 4; ++i) vst1q_s32(p + 4 * i, x.p[i]);
}
inline I operator-(I x, I y) {
  I r;
  for (int i = 0; i < 4; ++i) r.p[i] = vsubq_s32(x.p[i], y.p[i]);
  return r;
}
inline int32_t reduce_add(I x) {
  return vaddvq_s32(vaddq_s32(vaddq_s32(x.p[0], x.p[1]), vaddq_s32(x.p[2], x.p[3])));
}
inline V to_float(I x) {
  V r;
  for (int i = 0; i < 4; ++i) r.p[i] = vcvtq_f32_s32(x.p[i]);
  return r;
}
inline V load_i8(const int8_t* p) {
  const int8x16_t b = vld1q_s8(p);
  const int16x8_t lo = vmovl_s8(vget_low_s8(b)), hi = vmovl_high_s8(b);
  V r;
  r.p[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
  r.p[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
  r.p[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
  r.p[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
  return r;
}
#else
inline I izero() {
  I r;
  for (int i = 0; i < 16; ++i) r.f[i] = 0;
  return r;
}
inline Q loadq(const int8_t* p) {
  Q r;
  std::memcpy(r.f, p, 64);
  return r;
}
inline Q bcast4(const int8_t* p) {
  Q r;
  for (int i = 0; i < 64; ++i) r.f[i] = p[i % 4];
  return r;
}
inline I loadi(const int32_t* p) {
  I r;
  std::memcpy(r.f, p, 64);
  return r;
}
inline void storeu(int32_t* p, I x) { std::memcpy(p, x.f, 64); }
inline I operator-(I x, I y) {
  I r;
  for (int i = 0; i < 16; ++i) r.f[i] = x.f[i] - y.f[i];
  return r;
}
inline int32_t reduce_add(I x) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += x.f[i];
  return s;
}
inline V to_float(I x) {
  V r;
  for (int i = 0; i < 16; ++i) r.f[i] = static_cast<float>(x.f[i]);
  return r;
}
inline V load_i8(const int8_t* p) {
  V r;
  for (int i = 0; i < 16; ++i) r.f[i] = static_cast<float>(p[i]);
  return r;
}
#endif

// 16 floats holding integers in [-127, 127] -> int8 at p, the first n (<= 16) of them.
inline void store_i8(int8_t* p, V x, int64_t n) {
  alignas(16) int8_t t[16];
#if ATTNKIT_AVX512
  _mm_store_si128(reinterpret_cast<__m128i*>(t), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(x.v)));
#elif ATTNKIT_AVX2
  const __m256i w = _mm256_packs_epi32(_mm256_cvtps_epi32(x.a), _mm256_cvtps_epi32(x.b));  // a0-3 b0-3 | a4-7 b4-7
  const __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));  // a0-3 b0-3 a4-7 b4-7
  _mm_store_si128(reinterpret_cast<__m128i*>(t), _mm_shuffle_epi32(b, 0xD8));  // a0-7 b0-7
#elif ATTNKIT_NEON
  int16x8_t h[2];
  for (int i = 0; i < 2; ++i)
    h[i] = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(x.p[2 * i])), vqmovn_s32(vcvtnq_s32_f32(x.p[2 * i + 1])));
  vst1q_s8(t, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
#else
  for (int i = 0; i < 16; ++i) t[i] = static_cast<int8_t>(x.f[i]);
#endif
  std::memcpy(p, t, static_cast<size_t>(n));
}

// ---- dot products of groups of four -----------------------------------------------------------------
// The rows of x come in two planes (int8_quant.h writes both): a, the integers, and what the Dot multiplies
// besides (kPlane): |a| (the sign trick's u8 operand), a + 128 as u8 (VNNI's), or nothing (NEON, generic).
// Dot::load(a, b) takes 64 bytes of each plane, Dot::bcast(a, b) their 4 bytes broadcast to every group;
// Dot::dot(acc, x, w) adds the groups' dot products. kOffset: the sums hold 128 sum(w of the group) besides.
constexpr int kPlaneNone = 0, kPlaneAbs = 1, kPlaneU8 = 2;
#if ATTNKIT_AVX512
struct Dot {
  struct X {
    __m512i abs;
    __mmask64 neg;
  };
  static constexpr bool kOffset = false;
  static constexpr int kPlane = kPlaneAbs;
  static X load(const int8_t* a, const int8_t* b) {
    return {_mm512_loadu_si512(b), _mm512_movepi8_mask(_mm512_loadu_si512(a))};
  }
  static X bcast(const int8_t* a, const int8_t* b) { return {bcast4(b).v, _mm512_movepi8_mask(bcast4(a).v)}; }
  static I dot(I acc, X x, Q w) {
    const __m512i sw = _mm512_mask_sub_epi8(w.v, x.neg, _mm512_setzero_si512(), w.v);  // sign(x) w
    const __m512i pairs = _mm512_maddubs_epi16(x.abs, sw);
    return {_mm512_add_epi32(acc.v, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)))};
  }
};
#define ATTNKIT_FAST_DOT __attribute__((target("avx512f,avx512bw,avx512vnni")))
constexpr bool kFastDot = true;
inline bool cpu_has_fast_dot() { return __builtin_cpu_supports("avx512vnni"); }
struct DotVnni {
  using X = __m512i;
  static constexpr bool kOffset = true;
  static constexpr int kPlane = kPlaneU8;
  static X load(const int8_t*, const int8_t* b) { return _mm512_loadu_si512(b); }
  static X bcast(const int8_t*, const int8_t* b) { return bcast4(b).v; }
  ATTNKIT_FAST_DOT static I dot(I acc, X x, Q w) { return {_mm512_dpbusd_epi32(acc.v, x, w.v)}; }
};
using DotFast = DotVnni;
#elif ATTNKIT_AVX2
struct Dot {
  struct X {
    Q abs, a;
  };
  static constexpr bool kOffset = false;
  static constexpr int kPlane = kPlaneAbs;
  static X load(const int8_t* a, const int8_t* b) { return {loadq(b), loadq(a)}; }
  static X bcast(const int8_t* a, const int8_t* b) { return {bcast4(b), bcast4(a)}; }
  static I dot(I acc, X x, Q w) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i pa = _mm256_maddubs_epi16(x.abs.a, _mm256_sign_epi8(w.a, x.a.a));
    const __m256i pb = _mm256_maddubs_epi16(x.abs.b, _mm256_sign_epi8(w.b, x.a.b));
    return {_mm256_add_epi32(acc.a, _mm256_madd_epi16(pa, ones)), _mm256_add_epi32(acc.b, _mm256_madd_epi16(pb, ones))};
  }
};
#elif ATTNKIT_NEON
struct Dot {
  using X = Q;
  static constexpr bool kOffset = false;
  static constexpr int kPlane = kPlaneNone;
  static X load(const int8_t* a, const int8_t*) { return loadq(a); }
  static X bcast(const int8_t* a, const int8_t*) { return bcast4(a); }
  static I dot(I acc, X x, Q w) {
    for (int i = 0; i < 4; ++i) {  // 16 products in 16 bits, their pairs (|pair| < 2^15), pairs of pairs into int32
      const int16x8_t lo = vmull_s8(vget_low_s8(x.p[i]), vget_low_s8(w.p[i]));
      const int16x8_t hi = vmull_high_s8(x.p[i], w.p[i]);
      acc.p[i] = vpadalq_s16(acc.p[i], vpaddq_s16(lo, hi));
    }
    return acc;
  }
};
#define ATTNKIT_FAST_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
constexpr bool kFastDot = true;
inline bool cpu_has_fast_dot() {
#if defined(__linux__)
  return (getauxval(AT_HWCAP) & (1ul << 20)) != 0;  // HWCAP_ASIMDDP
#else
  return false;
#endif
}
struct DotSdot {
  using X = Q;
  static constexpr bool kOffset = false;
  static constexpr int kPlane = kPlaneNone;
  static X load(const int8_t* a, const int8_t*) { return loadq(a); }
  static X bcast(const int8_t* a, const int8_t*) { return bcast4(a); }
  ATTNKIT_FAST_DOT static I dot(I acc, X x, Q w) {
    for (int i = 0; i < 4; ++i) acc.p[i] = vdotq_s32(acc.p[i], x.p[i], w.p[i]);
    return acc;
  }
};
using DotFast = DotSdot;
#else
struct Dot {
  using X = Q;
  static constexpr bool kOffset = false;
  static constexpr int kPlane = kPlaneNone;
  static X load(const int8_t* a, const int8_t*) { return loadq(a); }
  static X bcast(const int8_t* a, const int8_t*) { return bcast4(a); }
  static I dot(I acc, X x, Q w) {
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 4; ++j) acc.f[i] += static_cast<int32_t>(x.f[4 * i + j]) * w.f[4 * i + j];
    return acc;
  }
};
#endif
#if !ATTNKIT_AVX512 && !ATTNKIT_NEON
#define ATTNKIT_FAST_DOT
constexpr bool kFastDot = false;
inline bool cpu_has_fast_dot() { return false; }
using DotFast = Dot;  // never chosen (kFastDot is false)
#endif

}  // namespace attnkit_simd
}  // namespace ATTNKIT_VARIANT
