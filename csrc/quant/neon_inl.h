// NEON building blocks of TFLite requantization, bit-exact with requantize.h.
// Include only from files compiled for aarch64 (neon.cc / neondot.cc).
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace edgeinf::qs8::neon {

// VQRDMULH is gemmlowp's saturating_rounding_doubling_high_mul exactly (ties toward
// +inf, INT32_MIN * INT32_MIN saturating). SRSHL rounds ties toward +inf as well, so
// negative values are first moved down by one to get gemmlowp's ties away from zero;
// `neg_right_shift` holds -right_shift, whose sign bit selects the lanes to fix.
static inline int32x4_t mbqm(int32x4_t x, int32x4_t multiplier, int32x4_t left_shift, int32x4_t neg_right_shift) {
  const int32x4_t high = vqrdmulhq_s32(vshlq_s32(x, left_shift), multiplier);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(high, neg_right_shift), 31);
  return vrshlq_s32(vqaddq_s32(high, fixup), neg_right_shift);
}

// mbqm where every lane shifts right by at least one bit and none left (neg_right_shift
// <= -1): the fixup is then x >> 31 for every lane, added by one SSRA, which cannot wrap
// (VQRDMULH of a multiplier below 2^31 never gives INT32_MIN).
static inline int32x4_t mbqm_right(int32x4_t x, int32x4_t multiplier, int32x4_t neg_right_shift) {
  const int32x4_t high = vqrdmulhq_s32(x, multiplier);
  return vrshlq_s32(vsraq_n_s32(high, high, 31), neg_right_shift);
}

// Eight lanes of mbqm_right with the zero point added, in int16 lanes: a value shifted right
// lies within +-2^30, and saturating it to int16 before adding a zero point in int8, then
// narrowing to int8 with saturation and clamping there, gives what the reference's int32
// addition and clamp give (saturation is monotonic and the activation range lies in int8).
static inline int16x8_t mbqm_right8(int32x4_t a0, int32x4_t a1, int32x4_t m0, int32x4_t m1, int32x4_t neg_r0,
                                    int32x4_t neg_r1, int16x8_t zero_point) {
  return vqaddq_s16(vqmovn_high_s32(vqmovn_s32(mbqm_right(a0, m0, neg_r0)), mbqm_right(a1, m1, neg_r1)), zero_point);
}

static inline int32x4_t requantize(int32x4_t acc, int32x4_t multiplier, int32x4_t left_shift, int32x4_t neg_right_shift,
                                   int32x4_t zero_point, int32x4_t lo, int32x4_t hi) {
  const int32x4_t v = vaddq_s32(mbqm(acc, multiplier, left_shift, neg_right_shift), zero_point);
  return vminq_s32(vmaxq_s32(v, lo), hi);
}

// requantize_double of requantize.h on 4 lanes; scale points at 4 doubles. FRINTA is
// std::round; FCVTZS and SQXTN saturate out-of-range values, as the scalar conversion on Arm.
static inline int32x4_t requantize_double(int32x4_t acc, const double* scale, int32x4_t zero_point, int32x4_t lo,
                                          int32x4_t hi) {
  const float64x2_t a = vrndaq_f64(vmulq_f64(vcvtq_f64_s64(vmovl_s32(vget_low_s32(acc))), vld1q_f64(scale)));
  const float64x2_t b = vrndaq_f64(vmulq_f64(vcvtq_f64_s64(vmovl_high_s32(acc)), vld1q_f64(scale + 2)));
  const int32x4_t v = vaddq_s32(vcombine_s32(vqmovn_s64(vcvtq_s64_f64(a)), vqmovn_s64(vcvtq_s64_f64(b))), zero_point);
  return vminq_s32(vmaxq_s32(v, lo), hi);
}

// requantize_double without its clamp: FCVTAS rounds to nearest with ties away from zero
// (std::round) and saturates to int64 as FRINTA + FCVTZS do, in one instruction.
static inline int32x4_t scaled_double(int32x4_t acc, const double* scale, int32x4_t zero_point) {
  const int64x2_t a = vcvtaq_s64_f64(vmulq_f64(vcvtq_f64_s64(vmovl_s32(vget_low_s32(acc))), vld1q_f64(scale)));
  const int64x2_t b = vcvtaq_s64_f64(vmulq_f64(vcvtq_f64_s64(vmovl_high_s32(acc)), vld1q_f64(scale + 2)));
  return vaddq_s32(vcombine_s32(vqmovn_s64(a), vqmovn_s64(b)), zero_point);
}

// The first n int8 lanes of v (int8x8_t or int8x16_t) stored at dst; a whole vector as
// one store.
template <typename V>
static inline void store_prefix(int8_t* dst, V v, size_t n) {
  if (n == sizeof(V)) {
    std::memcpy(dst, &v, sizeof(V));
  } else {
    std::memcpy(dst, &v, n);
  }
}

// 8 int32 lanes already within int8 range to 8 bytes.
static inline int8x8_t pack8(int32x4_t a, int32x4_t b) { return vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))); }

}  // namespace edgeinf::qs8::neon
