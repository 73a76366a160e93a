// AVX2 quantize / dequantize, 16 values per step, bit-exact with the scalar reference.
#include <immintrin.h>

#include "quantize.h"

namespace edgeinf::qs8 {
namespace {

// std::round on 8 floats: truncate, then step away from zero when the (exact)
// fractional part is at least one half.
inline __m256 round_half_away(__m256 r) {
  const __m256 t = _mm256_round_ps(r, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_sub_ps(r, t);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, frac), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 one_signed = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(r, sign_bit));
  return _mm256_add_ps(t, _mm256_and_ps(away, one_signed));
}

inline __m256i quantize8(__m256 x, __m256 scale, __m256 lo, __m256 hi, __m256 zero_f) {
  __m256 r = round_half_away(_mm256_div_ps(x, scale));
  const __m256 is_number = _mm256_cmp_ps(r, r, _CMP_ORD_Q);
  r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
  r = _mm256_and_ps(r, is_number);                      // NaN -> 0 (then + zero point)
  return _mm256_cvtps_epi32(_mm256_add_ps(r, zero_f));  // integers: the conversion is exact
}

}  // namespace

void qs8_quantize__avx2(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256 lo = _mm256_set1_ps(static_cast<float>(-128 - zero_point));
  const __m256 hi = _mm256_set1_ps(static_cast<float>(127 - zero_point));
  const __m256 zf = _mm256_set1_ps(static_cast<float>(zero_point));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = quantize8(_mm256_loadu_ps(x + i), vs, lo, hi, zf);
    const __m256i b = quantize8(_mm256_loadu_ps(x + i + 8), vs, lo, hi, zf);
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                     _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
  }
  for (; i < n; ++i) q[i] = quantize_one(x[i], scale, zero_point);
}

void qs8_dequantize__avx2(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point) {
  const __m256 vs = _mm256_set1_ps(scale);
  const __m256i zp = _mm256_set1_epi32(zero_point);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
    const __m256i a = _mm256_sub_epi32(_mm256_cvtepi8_epi32(bytes), zp);
    const __m256i b = _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)), zp);
    _mm256_storeu_ps(x + i, _mm256_mul_ps(vs, _mm256_cvtepi32_ps(a)));
    _mm256_storeu_ps(x + i + 8, _mm256_mul_ps(vs, _mm256_cvtepi32_ps(b)));
  }
  for (; i < n; ++i) x[i] = dequantize_one(q[i], scale, zero_point);
}

}  // namespace edgeinf::qs8
