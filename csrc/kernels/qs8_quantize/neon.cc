// NEON quantize / dequantize, 8 values per step, bit-exact with the scalar reference.
#include <arm_neon.h>

#include "quantize.h"

namespace edgeinf::qs8 {
namespace {

// FRINTA rounds ties away from zero, exactly std::round; the division is IEEE exact.
inline int32x4_t quantize4(float32x4_t x, float32x4_t scale, float32x4_t lo, float32x4_t hi, float32x4_t zero_f) {
  float32x4_t r = vrndaq_f32(vdivq_f32(x, scale));
  const uint32x4_t is_number = vceqq_f32(r, r);
  r = vminq_f32(vmaxq_f32(r, lo), hi);
  r = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(r), is_number));
  return vcvtq_s32_f32(vaddq_f32(r, zero_f));
}

}  // namespace

void qs8_quantize__neon(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point) {
  const float32x4_t vs = vdupq_n_f32(scale);
  const float32x4_t lo = vdupq_n_f32(static_cast<float>(-128 - zero_point));
  const float32x4_t hi = vdupq_n_f32(static_cast<float>(127 - zero_point));
  const float32x4_t zf = vdupq_n_f32(static_cast<float>(zero_point));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int32x4_t a = quantize4(vld1q_f32(x + i), vs, lo, hi, zf);
    const int32x4_t b = quantize4(vld1q_f32(x + i + 4), vs, lo, hi, zf);
    vst1_s8(q + i, vmovn_s16(vcombine_s16(vmovn_s32(a), vmovn_s32(b))));
  }
  for (; i < n; ++i) q[i] = quantize_one(x[i], scale, zero_point);
}

void qs8_dequantize__neon(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point) {
  const float32x4_t vs = vdupq_n_f32(scale);
  const int16x8_t zp = vdupq_n_s16(static_cast<int16_t>(zero_point));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int16x8_t d = vsubq_s16(vmovl_s8(vld1_s8(q + i)), zp);
    vst1q_f32(x + i, vmulq_f32(vs, vcvtq_f32_s32(vmovl_s16(vget_low_s16(d)))));
    vst1q_f32(x + i + 4, vmulq_f32(vs, vcvtq_f32_s32(vmovl_high_s16(d))));
  }
  for (; i < n; ++i) x[i] = dequantize_one(q[i], scale, zero_point);
}

}  // namespace edgeinf::qs8
