// NEON depthwise conv2d: 16 (then 8) channels per step, raw int8 inputs times int8
// weights.
//
// VMULL gives exact int16 products (at most 128 * 128). When no weight is -128, a second
// tap is added in int16 by VMLAL (|sum| <= 2 * 128 * 127 < 2^15), halving the widening
// adds (VADDW) into the int32 accumulators; otherwise every tap is widened on its own.
// The zero point enters as bias - zp * sum(w), so a padded tap, which reads the zero
// point, adds zp * w - zp * w = 0 like the reference's skipped tap, and the total equals
// the reference accumulator modulo 2^32. A depth multiplier above 1 reads rows with
// repeated channels (DwRows), so it runs the same code.
#include <arm_neon.h>

#include <vector>

#include "../../quant/rq_neon_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {
namespace {

using neon_rq::Output;
using neon_rq::requantize8;

// Outputs [0, full) of one pixel; src[t] points at the input pixel of tap t.
template <bool kPairs>
void pixel(const DwWeights& w, const int8_t* const* src, size_t taps, size_t full, const Output& q, int8_t* o) {
  const size_t C = w.channels();
  const int8_t* wt = w.weights();
  const int32_t* start = w.bias_minus_zero_point_terms();
  size_t c0 = 0;
  for (; c0 + 16 <= full; c0 += 16) {
    int32x4_t a0 = vld1q_s32(start + c0), a1 = vld1q_s32(start + c0 + 4);
    int32x4_t a2 = vld1q_s32(start + c0 + 8), a3 = vld1q_s32(start + c0 + 12);
    size_t t = 0;
    if (kPairs) {
      for (; t + 2 <= taps; t += 2) {
        const int8x16_t x0 = vld1q_s8(src[t] + c0), x1 = vld1q_s8(src[t + 1] + c0);
        const int8x16_t f0 = vld1q_s8(wt + t * C + c0), f1 = vld1q_s8(wt + (t + 1) * C + c0);
        const int16x8_t p0 = vmlal_s8(vmull_s8(vget_low_s8(x0), vget_low_s8(f0)), vget_low_s8(x1), vget_low_s8(f1));
        const int16x8_t p1 = vmlal_high_s8(vmull_high_s8(x0, f0), x1, f1);
        a0 = vaddw_s16(a0, vget_low_s16(p0));
        a1 = vaddw_high_s16(a1, p0);
        a2 = vaddw_s16(a2, vget_low_s16(p1));
        a3 = vaddw_high_s16(a3, p1);
      }
    }
    for (; t < taps; ++t) {
      const int8x16_t x = vld1q_s8(src[t] + c0), f = vld1q_s8(wt + t * C + c0);
      const int16x8_t p0 = vmull_s8(vget_low_s8(x), vget_low_s8(f));
      const int16x8_t p1 = vmull_high_s8(x, f);
      a0 = vaddw_s16(a0, vget_low_s16(p0));
      a1 = vaddw_high_s16(a1, p0);
      a2 = vaddw_s16(a2, vget_low_s16(p1));
      a3 = vaddw_high_s16(a3, p1);
    }
    vst1q_s8(o + c0, vcombine_s8(requantize8(a0, a1, q, c0), requantize8(a2, a3, q, c0 + 8)));
  }
  for (; c0 + 8 <= full; c0 += 8) {
    int32x4_t a0 = vld1q_s32(start + c0), a1 = vld1q_s32(start + c0 + 4);
    size_t t = 0;
    if (kPairs) {
      for (; t + 2 <= taps; t += 2) {
        const int16x8_t p = vmlal_s8(vmull_s8(vld1_s8(src[t] + c0), vld1_s8(wt + t * C + c0)), vld1_s8(src[t + 1] + c0),
                                     vld1_s8(wt + (t + 1) * C + c0));
        a0 = vaddw_s16(a0, vget_low_s16(p));
        a1 = vaddw_high_s16(a1, p);
      }
    }
    for (; t < taps; ++t) {
      const int16x8_t p = vmull_s8(vld1_s8(src[t] + c0), vld1_s8(wt + t * C + c0));
      a0 = vaddw_s16(a0, vget_low_s16(p));
      a1 = vaddw_high_s16(a1, p);
    }
    vst1_s8(o + c0, requantize8(a0, a1, q, c0));
  }
}

template <bool kPairs>
void run(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  const Output q(w.requantization(), w.neon_float_requantization());
  const size_t oc = g.in_c * g.depth_multiplier, full = oc / 8 * 8, taps = g.k_h * g.k_w;
  DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
  std::vector<const int8_t*> rp(g.k_h), src(taps);
  const ptrdiff_t in_w = static_cast<ptrdiff_t>(g.in_w);
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp.data());
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        for (size_t ky = 0, t = 0; ky < g.k_h; ++ky) {
          for (size_t kx = 0; kx < g.k_w; ++kx, ++t) {
            const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
            src[t] = ix >= 0 && ix < in_w ? rp[ky] + ix * static_cast<ptrdiff_t>(oc) : rows.zero_row();
          }
        }
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * oc;
        pixel<kPairs>(w, src.data(), taps, full, q, o);
        if (full < oc) dwconv_pixel_channels(w, g, in, b, oy, ox, full, oc, o);
      }
    }
  }
}

}  // namespace

void qs8_dwconv2d__neon(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  if (w.weights_above_min()) return run<true>(w, g, in, out);
  run<false>(w, g, in, out);
}

}  // namespace edgeinf::qs8
