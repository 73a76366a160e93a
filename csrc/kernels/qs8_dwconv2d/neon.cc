// NEON depthwise conv2d: 8 channels per step, int16 (a - zero_point) times int16
// weights accumulated into int32 with VMLAL. A depth multiplier above 1 runs the
// scalar reference.
#include <arm_neon.h>

#include "../qs8_requantize/neon_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {

void qs8_dwconv2d__neon(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using namespace neon;
  if (g.depth_multiplier != 1) return qs8_dwconv2d__scalar(w, g, in, out);
  const size_t C = g.in_c, CP = w.padded_channels(), full = C / 8 * 8;
  const Requantization& rq = w.requantization();
  const int16x8_t zp_in = vdupq_n_s16(static_cast<int16_t>(w.input_zero_point()));
  const int32x4_t zp_out = vdupq_n_s32(rq.output_zero_point);
  const int32x4_t lo = vdupq_n_s32(rq.act_min), hi = vdupq_n_s32(rq.act_max);
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * C;
        for (size_t c0 = 0; c0 < full; c0 += 8) {
          int32x4_t acc0 = vld1q_s32(w.bias() + c0), acc1 = vld1q_s32(w.bias() + c0 + 4);
          for (size_t ky = 0; ky < g.k_h; ++ky) {
            const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
            if (iy < 0 || iy >= static_cast<ptrdiff_t>(g.in_h)) continue;
            for (size_t kx = 0; kx < g.k_w; ++kx) {
              const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
              if (ix < 0 || ix >= static_cast<ptrdiff_t>(g.in_w)) continue;
              const int8_t* px = in + ((b * g.in_h + iy) * g.in_w + ix) * C + c0;
              const int16x8_t x = vsubq_s16(vmovl_s8(vld1_s8(px)), zp_in);
              const int16x8_t f = vld1q_s16(w.weights16() + (ky * g.k_w + kx) * CP + c0);
              acc0 = vmlal_s16(acc0, vget_low_s16(x), vget_low_s16(f));
              acc1 = vmlal_high_s16(acc1, x, f);
            }
          }
          int32x4_t v[2];
          const int32x4_t acc[2] = {acc0, acc1};
          for (int h = 0; h < 2; ++h) {
            const size_t c = c0 + 4 * h;
            v[h] = requantize(acc[h], vld1q_s32(rq.multiplier.data() + c), vld1q_s32(rq.left_shift.data() + c),
                              vnegq_s32(vld1q_s32(rq.right_shift.data() + c)), zp_out, lo, hi);
          }
          vst1_s8(o + c0, pack8(v[0], v[1]));
        }
        if (full < C) dwconv_pixel_channels(w, g, in, b, oy, ox, full, C, o);
      }
    }
  }
}

}  // namespace edgeinf::qs8
