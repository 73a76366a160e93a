// NEON pooling over 16 channels per step (a channel count past 16 that is not a multiple
// of 16 ends with a block overlapping the one before); fewer than 16 channels and
// oversized average windows take the scalar path for those outputs.
#include <arm_neon.h>

#include "pool.h"
#include "pool_simd_inl.h"

namespace edgeinf::qs8 {
namespace {

// (sum +- count/2) / count truncated, through float: exact for |sum| < 2^22.
inline int32x4_t average4(int32x4_t sum, int32x4_t half, float32x4_t count_f) {
  const int32x4_t negative = vreinterpretq_s32_u32(vcltq_s32(sum, vdupq_n_s32(0)));
  const int32x4_t numer = vaddq_s32(sum, vsubq_s32(veorq_s32(half, negative), negative));
  return vcvtq_s32_f32(vdivq_f32(vcvtq_f32_s32(numer), count_f));
}

// The maximum starts at the activation's minimum instead of -128: max(act_min, taps) is
// the window's maximum clamped from below, so only the upper clamp is left.
struct MaxBlock {
  static constexpr bool kOverlapTail = true;
  explicit MaxBlock(const PoolGeometry& g)
      : floor(vdupq_n_s8(static_cast<int8_t>(g.act_min))), ceiling(vdupq_n_s8(static_cast<int8_t>(g.act_max))) {}
  void start() { m = floor; }
  void add(const int8_t* p) { m = vmaxq_s8(m, vld1q_s8(p)); }
  void store(int8_t* o, size_t) const { vst1q_s8(o, vminq_s8(m, ceiling)); }
  int8x16_t floor, ceiling, m;
};

struct AverageBlock {
  static constexpr bool kOverlapTail = true;
  explicit AverageBlock(const PoolGeometry& g) : lo(vdupq_n_s32(g.act_min)), hi(vdupq_n_s32(g.act_max)) {}
  void start() {
    for (int i = 0; i < 4; ++i) s[i] = vdupq_n_s32(0);
  }
  void add(const int8_t* p) {
    const int8x16_t v = vld1q_s8(p);
    const int16x8_t l = vmovl_s8(vget_low_s8(v)), h = vmovl_high_s8(v);
    s[0] = vaddw_s16(s[0], vget_low_s16(l));
    s[1] = vaddw_high_s16(s[1], l);
    s[2] = vaddw_s16(s[2], vget_low_s16(h));
    s[3] = vaddw_high_s16(s[3], h);
  }
  void store(int8_t* o, size_t count) const {
    const int32x4_t half = vdupq_n_s32(static_cast<int32_t>(count / 2));
    const float32x4_t cf = vdupq_n_f32(static_cast<float>(count));
    int32x4_t a[4];
    for (int i = 0; i < 4; ++i) a[i] = vminq_s32(vmaxq_s32(average4(s[i], half, cf), lo), hi);
    const int16x8_t w0 = vcombine_s16(vmovn_s32(a[0]), vmovn_s32(a[1]));
    const int16x8_t w1 = vcombine_s16(vmovn_s32(a[2]), vmovn_s32(a[3]));
    vst1q_s8(o, vcombine_s8(vmovn_s16(w0), vmovn_s16(w1)));
  }
  int32x4_t lo, hi, s[4];
};

// The networks' downsampling pool: 2x2 windows at stride 2, all inside the image.
bool whole_2x2_windows(const PoolGeometry& g) {
  return g.filter_h == 2 && g.filter_w == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_top == 0 &&
         g.pad_left == 0 && g.out_h * 2 <= g.in_h && g.out_w * 2 <= g.in_w && g.channels >= 16;
}

// Max pooling over whole 2x2 windows: per 16 channels the four taps' maximum, without the
// general loop's window clipping.
void maxpool_2x2(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  const size_t C = g.channels, row = g.in_w * C;
  const int8x16_t lo = vdupq_n_s8(static_cast<int8_t>(g.act_min)), hi = vdupq_n_s8(static_cast<int8_t>(g.act_max));
  for (size_t r = 0; r < g.batch * g.out_h; ++r) {
    const int8_t* top = in + ((r / g.out_h) * g.in_h + r % g.out_h * 2) * row;
    for (size_t ox = 0; ox < g.out_w; ++ox, out += C) {
      const int8_t* a = top + ox * 2 * C;
      for (size_t c = 0; c < C; c += 16) {
        c = c + 16 > C ? C - 16 : c;  // the last block may overlap the one before
        const int8x16_t m = vmaxq_s8(vmaxq_s8(vld1q_s8(a + c), vld1q_s8(a + C + c)),
                                     vmaxq_s8(vld1q_s8(a + row + c), vld1q_s8(a + row + C + c)));
        vst1q_s8(out + c, vminq_s8(vmaxq_s8(m, lo), hi));
      }
    }
  }
}

}  // namespace

void qs8_maxpool__neon(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  if (whole_2x2_windows(g)) return maxpool_2x2(g, in, out);
  pool_simd::pool<true, MaxBlock>(g, in, out);
}
void qs8_avgpool__neon(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  pool_simd::pool<false, AverageBlock>(g, in, out);
}

}  // namespace edgeinf::qs8
