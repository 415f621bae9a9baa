// AVX-512 helpers every native kernel shares: exp, float32 <-> bfloat16 loads and stores, the
// AVX512-BF16 target attribute and its run-time check, uninitialised float32 scratch. Arithmetic is float32 throughout.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace attnkit_simd {

// Functions that use AVX512-BF16 instructions carry this attribute and run only after cpu_has_bf16().
#define ATTNKIT_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))

inline bool cpu_has_bf16() { return __builtin_cpu_supports("avx512bf16"); }

// exp(x) for x <= 0 (and -inf -> 0): Cody-Waite range reduction, degree-6 polynomial, scalef.
// NaN stays NaN (max_ps returns its second operand when either is NaN), so a NaN score is never
// turned into a weight.
inline __m512 exp_ps(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // exp(-104) underflows to 0 after scalef
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  __m512 r2 = _mm512_mul_ps(r, r);
  p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Element access for float and bfloat16 (stored as uint16_t; round to nearest even on the way out).
inline float to_f(float x) { return x; }
inline float to_f(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// A float32 scratch of n values, left uninitialised (std::vector would zero it: a memset of every call's
// scratch, a few microseconds at a sentence's sizes).
inline std::unique_ptr<float[]> scratch_floats(size_t n) { return std::unique_ptr<float[]>(new float[n]); }

inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void store16(float* p, __m512 x) { _mm512_storeu_ps(p, x); }
// 16 floats rounded to bfloat16 (to nearest even)
inline __m256i bf16_bits(__m512 x) {
  __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  u = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
  // a NaN keeps its quiet bit, so rounding can never carry it into infinity
  u = _mm512_mask_or_epi32(u, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), u, _mm512_set1_epi32(0x00400000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16));
}
inline void store16(uint16_t* p, __m512 x) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16_bits(x)); }

// The first min(n, 16) lanes (a head's last group of 16 columns may be partial): masked loads read nothing
// past them and masked stores write nothing past them.
inline __mmask16 first_lanes(int n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
inline __m512 load16(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void store16(float* p, __m512 x, __mmask16 m) { _mm512_mask_storeu_ps(p, m, x); }
inline void store16(uint16_t* p, __m512 x, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, bf16_bits(x)); }

}  // namespace attnkit_simd
