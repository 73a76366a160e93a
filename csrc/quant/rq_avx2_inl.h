// AVX2 requantization of a block of 16 accumulators packed by rq_params.h, bit-exact
// with requantize.h. Include only from files compiled with -mavx2 (avx2.cc).
//
// MultiplyByQuantizedMultiplier: VPMULDQ on even and odd lanes for the rounding doubling
// high multiply (multipliers are non-negative, so the product cannot overflow and
// floor((a * b + 2^30) / 2^31) is gemmlowp's result), then the rounding shift, ties away
// from zero, as sign(y) * ((|y| + half) >> r) on magnitudes taken as uint32 (|INT32_MIN|
// = 2^31 and |y| + half both fit). The output zero point is added with int16 saturation
// and the clamp is done on bytes: every saturation lands beyond the int8 range, so the
// result is the reference's int32 clamp. Channels fitted with a float form (kRqFloat,
// rq_float__avx2.cc) take one VFMADD instead, its result rounded by VCVTPS2DQ.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "rq_params.h"

namespace edgeinf::qs8::avx2_rq {

static inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// MultiplyByQuantizedMultiplier of 8 lanes with their parameters in registers: the
// multiplier of lane i | 1 in lane i (`multiplier_odd`) and half = (1 << right_shift) >> 1.
// Without kRight no channel shifts right, and the rounding divide by 2^0 is the identity.
template <bool kLeft, bool kRight = true>
static inline __m256i mbqm8(__m256i x, __m256i multiplier, __m256i multiplier_odd, __m256i left_shift,
                            __m256i right_shift, __m256i half) {
  if (kLeft) x = _mm256_sllv_epi32(x, left_shift);
  const __m256i round = _mm256_set1_epi64x(int64_t{1} << 30);
  const __m256i even = _mm256_srli_epi64(_mm256_add_epi64(_mm256_mul_epi32(x, multiplier), round), 31);
  // odd << 1 as odd + odd: an add runs on any vector pipe, a shift only on the two that
  // also do every unpack, widening and pack of the kernels.
  const __m256i odd_sum = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), multiplier_odd), round);
  const __m256i odd = _mm256_add_epi64(odd_sum, odd_sum);
  const __m256i y = _mm256_blend_epi32(even, odd, 0xAA);
  if (!kRight) return y;
  const __m256i mag = _mm256_add_epi32(_mm256_abs_epi32(y), half);
  return _mm256_sign_epi32(_mm256_srlv_epi32(mag, right_shift), y);
}

// Half h (8 lanes) of a block whose parameters start at prm.
template <bool kLeft, bool kRight>
static inline __m256i mbqm_half(__m256i x, const int32_t* prm, size_t h) {
  const __m256i zero = _mm256_setzero_si256();
  return mbqm8<kLeft, kRight>(x, load(prm + kRqMultiplier * 16 + h * 8), load(prm + kRqMultiplierOdd * 16 + h * 8),
                              kLeft ? load(prm + kRqLeftShift * 16 + h * 8) : zero,
                              kRight ? load(prm + kRqRightShift * 16 + h * 8) : zero,
                              kRight ? load(prm + kRqHalf * 16 + h * 8) : zero);
}

// The float form (rq_params.h's FloatRequantization) of half h: the output zero point is in
// the offsets, and the saturating packs that follow are the int8 saturation.
template <bool kSplit>
static inline __m256i float_form8(__m256i acc, const int32_t* prm, size_t h) {
  const __m256 x = _mm256_cvtepi32_ps(acc);
  const float* p = reinterpret_cast<const float*>(prm) + h * 8;
  __m256 offset = _mm256_loadu_ps(p + kRqOffset * 16);
  if (kSplit) offset = _mm256_blendv_ps(offset, _mm256_loadu_ps(p + kRqOffsetNeg * 16), x);  // by the sign of x
  return _mm256_cvtps_epi32(_mm256_fmadd_ps(x, _mm256_loadu_ps(p + kRqScale * 16), offset));
}

// VCVTPS2DQ rounds by MXCSR's mode; the float form is exact under the default only.
static inline bool rounds_to_nearest() { return (_mm_getcsr() & _MM_ROUND_MASK) == _MM_ROUND_NEAREST; }

// The flags of a call: the float form only while rounding to nearest.
static inline int call_flags(int flags) {
  return (flags & kRqFloat) && !rounds_to_nearest() ? flags & ~kRqFloat : flags;
}

struct Output {
  __m256i zero_point16;
  __m128i lo, hi;
  Output(const Requantization& rq)
      : zero_point16(_mm256_set1_epi16(static_cast<int16_t>(rq.output_zero_point))),
        lo(_mm_set1_epi8(static_cast<char>(rq.act_min))),
        hi(_mm_set1_epi8(static_cast<char>(rq.act_max))) {}
};

// Calls f(std::integral_constant<int, kFlags>()) for the first of kFlags equal to `flags`,
// or for the last one when none is.
template <int kFirst, int... kRest, class F>
inline void with_one_of(int flags, F&& f) {
  if constexpr (sizeof...(kRest) == 0) {
    f(std::integral_constant<int, kFirst>());
  } else if (flags == kFirst) {
    f(std::integral_constant<int, kFirst>());
  } else {
    with_one_of<kRest...>(flags, f);
  }
}

// Calls f(std::integral_constant<int, flags>()) for run-time flags: any fixed-point
// combination, or the float form (never with kRqLeft).
template <class F>
inline void with_rq_flags(int flags, F&& f) {
  with_one_of<0, 1, 2, 3, 4, 5, 6, 7, kRqFloat, kRqFloat | kRqClamp, kRqFloat | kRqRight,
              kRqFloat | kRqClamp | kRqRight>(flags, f);
}

// 16 int8 outputs in channel order from the block's two accumulator halves.
template <int kFlags>
static inline __m128i requantize16(__m256i acc0, __m256i acc1, const int32_t* prm, const Output& q) {
  constexpr bool kLeft = (kFlags & kRqLeft) != 0, kRight = (kFlags & kRqRight) != 0;
  if constexpr ((kFlags & kRqFloat) != 0) {
    const __m256i v16 = _mm256_packs_epi32(float_form8<kRight>(acc0, prm, 0), float_form8<kRight>(acc1, prm, 1));
    const __m128i v8 = _mm_packs_epi16(_mm256_castsi256_si128(v16), _mm256_extracti128_si256(v16, 1));
    if (!(kFlags & kRqClamp)) return v8;
    return _mm_min_epi8(_mm_max_epi8(v8, q.lo), q.hi);
  }
  const __m256i lo = mbqm_half<kLeft, kRight>(acc0, prm, 0), hi = mbqm_half<kLeft, kRight>(acc1, prm, 1);
  const __m256i v16 = _mm256_adds_epi16(_mm256_packs_epi32(lo, hi), q.zero_point16);
  // the two 128-bit halves packed together: VEXTRACTI128 is cheaper than a VPERMQ on Zen 3
  const __m128i v8 = _mm_packs_epi16(_mm256_castsi256_si128(v16), _mm256_extracti128_si256(v16, 1));
  if (!(kFlags & kRqClamp)) return v8;
  return _mm_min_epi8(_mm_max_epi8(v8, q.lo), q.hi);
}

}  // namespace edgeinf::qs8::avx2_rq
