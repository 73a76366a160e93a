// AVX2 building blocks of TFLite requantization, bit-exact with requantize.h.
// Include only from files compiled with -mavx2 (the avx2.cc files).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace edgeinf::qs8::avx2 {

// saturating_rounding_doubling_high_mul for b >= 0 (quantized multipliers are), where
// the product cannot overflow: floor((a*b + 2^30) / 2^31), i.e. ties toward +inf. The
// low 32 bits of a logical 64-bit shift equal those of an arithmetic one.
static inline __m256i srdhm_nonneg(__m256i a, __m256i b) {
  const __m256i round = _mm256_set1_epi64x(int64_t{1} << 30);
  const __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(a, b), round), 31);
  const __m256i odd_prod = _mm256_mul_epi32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(b, 32));
  const __m256i odd = _mm256_slli_epi64(_mm256_add_epi64(odd_prod, round), 1);  // result in the high half
  return _mm256_blend_epi32(even, odd, 0xAA);
}

// rounding_divide_by_pot with a per-lane exponent in [0, 31]: ties away from zero.
static inline __m256i rdbpot(__m256i x, __m256i exponent) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, exponent), one);
  const __m256i remainder = _mm256_and_si256(x, mask);
  // threshold = mask/2 + (x < 0); the compare yields -1 for true, hence the subtraction
  const __m256i threshold = _mm256_sub_epi32(_mm256_srli_epi32(mask, 1), _mm256_cmpgt_epi32(_mm256_setzero_si256(), x));
  return _mm256_sub_epi32(_mm256_srav_epi32(x, exponent), _mm256_cmpgt_epi32(remainder, threshold));
}

// multiply_by_quantized_multiplier with per-lane parameters (left/right shifts split).
static inline __m256i mbqm(__m256i x, __m256i multiplier, __m256i left_shift, __m256i right_shift) {
  return rdbpot(srdhm_nonneg(_mm256_sllv_epi32(x, left_shift), multiplier), right_shift);
}

// Requantized int32 lanes, clamped to [lo, hi] (both within int8).
static inline __m256i requantize(__m256i acc, __m256i multiplier, __m256i left_shift, __m256i right_shift,
                                 __m256i zero_point, __m256i lo, __m256i hi) {
  __m256i v = _mm256_add_epi32(mbqm(acc, multiplier, left_shift, right_shift), zero_point);
  return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
}

// std::round on 4 doubles: truncate, then step away from zero on an (exact) fraction >= 1/2.
static inline __m256d round_half_away_pd(__m256d x) {
  const __m256d t = _mm256_round_pd(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m256d away = _mm256_cmp_pd(_mm256_andnot_pd(sign, _mm256_sub_pd(x, t)), _mm256_set1_pd(0.5), _CMP_GE_OQ);
  return _mm256_add_pd(t, _mm256_and_pd(away, _mm256_or_pd(_mm256_set1_pd(1.0), _mm256_and_pd(x, sign))));
}

// requantize_double of requantize.h on 8 lanes; scale points at 8 doubles. VCVTTPD2DQ
// gives INT32_MIN out of range, as the scalar conversion on x86.
static inline __m256i requantize_double(__m256i acc, const double* scale, __m256i zero_point, __m256i lo, __m256i hi) {
  const __m256d a =
      round_half_away_pd(_mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(acc)), _mm256_loadu_pd(scale)));
  const __m256d b = round_half_away_pd(
      _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(acc, 1)), _mm256_loadu_pd(scale + 4)));
  const __m256i v = _mm256_add_epi32(_mm256_set_m128i(_mm256_cvttpd_epi32(b), _mm256_cvttpd_epi32(a)), zero_point);
  return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
}

// Packs 16 int32 lanes already within int8 range to 16 bytes in order.
static inline __m128i pack16(__m256i a, __m256i b) {
  const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
  return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

// Packs 8 int32 lanes already within int8 range to 8 bytes (low half of the result).
static inline __m128i pack8(__m256i a) {
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return _mm_packs_epi16(w, w);
}

// The first n (<= 16) bytes of v to dst, in at most two fixed-size overlapping moves: a
// memcpy of a variable size is a library call, costlier than a tile's whole store.
static inline void store_bytes(int8_t* dst, __m128i v, size_t n) {
  if (n == 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), v);
    return;
  }
  alignas(16) int8_t tmp[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), v);
  if (n >= 8) {
    std::memcpy(dst, tmp, 8);
    std::memcpy(dst + n - 8, tmp + n - 8, 8);
  } else if (n >= 4) {
    std::memcpy(dst, tmp, 4);
    std::memcpy(dst + n - 4, tmp + n - 4, 4);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = tmp[i];
  }
}

static inline __m256i load8_i32(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

}  // namespace edgeinf::qs8::avx2
