// NEON add / mul: 8 values per step in int32 lanes.
#include <arm_neon.h>

#include "../../quant/neon_inl.h"
#include "binary.h"

namespace edgeinf::qs8 {
namespace {

struct Scale {
  int32x4_t multiplier, left, neg_right;
  Scale(int32_t m, int32_t shift)
      : multiplier(vdupq_n_s32(m)),
        left(vdupq_n_s32(shift > 0 ? shift : 0)),
        neg_right(vdupq_n_s32(shift > 0 ? 0 : shift)) {}
  int32x4_t apply(int32x4_t x) const { return neon::mbqm(x, multiplier, left, neg_right); }
};

}  // namespace

void qs8_add__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  const int32x4_t off1 = vdupq_n_s32(p.input1_offset), off2 = vdupq_n_s32(p.input2_offset);
  const int32x4_t shift = vdupq_n_s32(p.left_shift);
  const Scale s1(p.input1_multiplier, p.input1_shift), s2(p.input2_multiplier, p.input2_shift);
  const Scale so(p.output_multiplier, p.output_shift);
  const int32x4_t zp = vdupq_n_s32(p.output_offset);
  const int32x4_t lo = vdupq_n_s32(p.act_min), hi = vdupq_n_s32(p.act_max);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int16x8_t xa = vmovl_s8(vld1_s8(a + i)), xb = vmovl_s8(vld1_s8(b + i));
    int32x4_t r[2];
    for (int h = 0; h < 2; ++h) {
      const int32x4_t x = vshlq_s32(vaddq_s32(vmovl_s16(h ? vget_high_s16(xa) : vget_low_s16(xa)), off1), shift);
      const int32x4_t y = vshlq_s32(vaddq_s32(vmovl_s16(h ? vget_high_s16(xb) : vget_low_s16(xb)), off2), shift);
      const int32x4_t v = vaddq_s32(so.apply(vaddq_s32(s1.apply(x), s2.apply(y))), zp);
      r[h] = vminq_s32(vmaxq_s32(v, lo), hi);
    }
    vst1_s8(out + i, neon::pack8(r[0], r[1]));
  }
  for (; i < n; ++i) out[i] = add_one(a[i], b[i], p);
}

void qs8_mul__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  const int32x4_t off1 = vdupq_n_s32(p.input1_offset), off2 = vdupq_n_s32(p.input2_offset);
  const Scale so(p.output_multiplier, p.output_shift);
  const int32x4_t zp = vdupq_n_s32(p.output_offset);
  const int32x4_t lo = vdupq_n_s32(p.act_min), hi = vdupq_n_s32(p.act_max);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int16x8_t xa = vmovl_s8(vld1_s8(a + i)), xb = vmovl_s8(vld1_s8(b + i));
    int32x4_t r[2];
    for (int h = 0; h < 2; ++h) {
      const int32x4_t x = vaddq_s32(vmovl_s16(h ? vget_high_s16(xa) : vget_low_s16(xa)), off1);
      const int32x4_t y = vaddq_s32(vmovl_s16(h ? vget_high_s16(xb) : vget_low_s16(xb)), off2);
      const int32x4_t v = vaddq_s32(so.apply(vmulq_s32(x, y)), zp);
      r[h] = vminq_s32(vmaxq_s32(v, lo), hi);
    }
    vst1_s8(out + i, neon::pack8(r[0], r[1]));
  }
  for (; i < n; ++i) out[i] = mul_one(a[i], b[i], p);
}

}  // namespace edgeinf::qs8
