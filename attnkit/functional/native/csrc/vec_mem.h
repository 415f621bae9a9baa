// The vector layer's memory side (csrc/vec.h's V and M): float32 and bfloat16 loads and stores, whole and
// masked (masked lanes are never read or written), bfloat16 rounding, AVX512-BF16's gate, prefetches, uninitialised
// scratch, and the run-time choice of a register tile's size. Included by vec.h.
#pragma once

namespace ATTNKIT_VARIANT {
namespace attnkit_simd {

// ---- bfloat16 ------------------------------------------------------------------------------------
// Element access for float and bfloat16 (stored as uint16_t; round to nearest even on the way out).
inline float to_f(float x) { return x; }
inline float to_f(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t bf16_round(float x) {  // to nearest even; a NaN keeps its quiet bit (never rounds to inf)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (x != x) return static_cast<uint16_t>((u | 0x00400000u) >> 16);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

inline V load16(const float* p) { return loadu(p); }
inline void store16(float* p, V x) { storeu(p, x); }
#if ATTNKIT_AVX512
inline V load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline __m256i bf16_bits(V x) {  // 16 floats rounded to bfloat16 (to nearest even)
  __m512i u = _mm512_castps_si512(x.v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  u = _mm512_mask_or_epi32(u, _mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q), u, _mm512_set1_epi32(0x00400000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}
inline void store16(uint16_t* p, V x) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits(x)); }
// Masked: lanes outside m are not read (loads give 0 there) and not written.
inline V load16(const float* p, M m) { return {_mm512_maskz_loadu_ps(m, p)}; }
inline V load16(const uint16_t* p, M m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline void store16(float* p, V x, M m) { _mm512_mask_storeu_ps(p, m, x.v); }
inline void store16(uint16_t* p, V x, M m) { _mm256_mask_storeu_epi16(p, m, bf16_bits(x)); }
#else
#if ATTNKIT_AVX2
inline V load16(const uint16_t* p) {
  const __m256i lo = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
}
#else
inline V load16(const uint16_t* p) {
  alignas(64) float f[16];
  for (int i = 0; i < 16; ++i) f[i] = to_f(p[i]);
  return loadu(f);
}
#endif
inline void store16(uint16_t* p, V x) {
  alignas(64) float f[16];
  storeu(f, x);
  for (int i = 0; i < 16; ++i) p[i] = bf16_round(f[i]);
}
template <typename S>
inline V load16(const S* p, M m) {  // lanes outside m are not read
  const uint32_t b = bits(m);
  if (b == 0xFFFF) return load16(p);
  alignas(64) float f[16];
  for (int i = 0; i < 16; ++i) f[i] = (b >> i) & 1u ? to_f(p[i]) : 0.0f;
  return loadu(f);
}
inline void store16(float* p, V x, M m) {
  const uint32_t b = bits(m);
  if (b == 0xFFFF) return storeu(p, x);
  alignas(64) float f[16];
  storeu(f, x);
  for (int i = 0; i < 16; ++i)
    if ((b >> i) & 1u) p[i] = f[i];
}
inline void store16(uint16_t* p, V x, M m) {
  const uint32_t b = bits(m);
  alignas(64) float f[16];
  storeu(f, x);
  for (int i = 0; i < 16; ++i)
    if ((b >> i) & 1u) p[i] = bf16_round(f[i]);
}
#endif

// AVX512-BF16: only the AVX-512 variant has these instructions, in functions that carry ATTNKIT_BF16 and run
// only after cpu_has_bf16(); the other variants compile no such function (kBf16 is false there).
#if ATTNKIT_AVX512
#define ATTNKIT_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
constexpr bool kBf16 = true;
inline bool cpu_has_bf16() { return __builtin_cpu_supports("avx512bf16"); }
#else
#define ATTNKIT_BF16
constexpr bool kBf16 = false;
inline bool cpu_has_bf16() { return false; }
#endif

// ---- the rest ------------------------------------------------------------------------------------
// A float32 scratch of n values, left uninitialised (std::vector would zero it: a memset of every call's
// scratch).
inline std::unique_ptr<float[]> scratch_floats(size_t n) { return std::unique_ptr<float[]>(new float[n]); }

// Prefetch one cache line into L1 (t0) or L2 (t2). L1: __builtin_prefetch written in place (a macro), which
// the compiler schedules freely. Through an inline function, or as _mm_prefetch, GCC 12 keeps a copy of the
// AVX2 and NEON variants' register tiles on the stack (a store per accumulator per step, which slowed the
// AVX2 panels); an asm statement made the decoding step's linear layers slower (docs/design.md). L2: an asm statement on x86, because GCC 12 dropped __builtin_prefetch / _mm_prefetch in
// the attention kernel as dead code.
#define prefetch_l1(p) __builtin_prefetch((p), 0, 3)
inline void prefetch_l2(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht2 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 1);
#endif
}

// f(std::integral_constant<int, m>) with m = min(n, N), n >= 1: picks a register tile size at run time.
template <int N, typename F>
inline void with_constant(int n, F&& f) {
  if constexpr (N == 1)
    f(std::integral_constant<int, 1>{});
  else if (n >= N)
    f(std::integral_constant<int, N>{});
  else
    with_constant<N - 1>(n, f);
}

}  // namespace attnkit_simd
}  // namespace ATTNKIT_VARIANT
