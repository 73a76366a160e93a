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

// Widened products of the 16 channels of x and f added into acc (int32, 4 x 4 lanes); with
// a second tap (x1, f1), its products are added in int16 first.
template <bool kSecond>
inline void mac16(int32x4_t (&acc)[4], int8x16_t x0, int8x16_t f0, int8x16_t x1, int8x16_t f1) {
  int16x8_t p0 = vmull_s8(vget_low_s8(x0), vget_low_s8(f0));
  int16x8_t p1 = vmull_high_s8(x0, f0);
  if (kSecond) {
    p0 = vmlal_s8(p0, vget_low_s8(x1), vget_low_s8(f1));
    p1 = vmlal_high_s8(p1, x1, f1);
  }
  acc[0] = vaddw_s16(acc[0], vget_low_s16(p0));
  acc[1] = vaddw_high_s16(acc[1], p0);
  acc[2] = vaddw_s16(acc[2], vget_low_s16(p1));
  acc[3] = vaddw_high_s16(acc[3], p1);
}

template <bool kSecond>
inline void mac8(int32x4_t (&acc)[2], int8x8_t x0, int8x8_t f0, int8x8_t x1, int8x8_t f1) {
  int16x8_t p = vmull_s8(x0, f0);
  if (kSecond) p = vmlal_s8(p, x1, f1);
  acc[0] = vaddw_s16(acc[0], vget_low_s16(p));
  acc[1] = vaddw_high_s16(acc[1], p);
}

// Outputs [0, full) of P adjacent pixels (P = 1 or 2): src[t] points at pixel 0's input of
// tap t, pixel j's at src[t] + j * step; outputs o + j * o_step. The pixels share each
// weight load, and their results are stored only after both are requantized, so that the
// requantization's parameters are loaded once (an int8 store may alias them).
template <bool kPairs, int P>
void pixels(const DwWeights& w, const int8_t* const* src, size_t step, size_t taps, size_t full, const Output& q,
            int8_t* o, size_t o_step) {
  const size_t C = w.channels();
  const int8_t* wt = w.weights();
  const int32_t* start = w.bias_minus_zero_point_terms();
  size_t c0 = 0;
  for (; c0 + 16 <= full; c0 += 16) {
    int32x4_t acc[P][4];
    for (int j = 0; j < P; ++j) {
      for (int i = 0; i < 4; ++i) acc[j][i] = vld1q_s32(start + c0 + 4 * i);
    }
    size_t t = 0;
    if (kPairs) {
      for (; t + 2 <= taps; t += 2) {
        const int8x16_t f0 = vld1q_s8(wt + t * C + c0), f1 = vld1q_s8(wt + (t + 1) * C + c0);
        const int8_t *s0 = src[t] + c0, *s1 = src[t + 1] + c0;
        for (int j = 0; j < P; ++j) mac16<true>(acc[j], vld1q_s8(s0 + j * step), f0, vld1q_s8(s1 + j * step), f1);
      }
    }
    for (; t < taps; ++t) {
      const int8x16_t f = vld1q_s8(wt + t * C + c0);
      const int8_t* s0 = src[t] + c0;
      for (int j = 0; j < P; ++j) mac16<false>(acc[j], vld1q_s8(s0 + j * step), f, f, f);
    }
    int8x16_t v[P];
    for (int j = 0; j < P; ++j)
      v[j] = vcombine_s8(requantize8(acc[j][0], acc[j][1], q, c0), requantize8(acc[j][2], acc[j][3], q, c0 + 8));
    for (int j = 0; j < P; ++j) vst1q_s8(o + j * o_step + c0, v[j]);
  }
  for (; c0 + 8 <= full; c0 += 8) {
    int32x4_t acc[P][2];
    for (int j = 0; j < P; ++j) acc[j][0] = vld1q_s32(start + c0), acc[j][1] = vld1q_s32(start + c0 + 4);
    size_t t = 0;
    if (kPairs) {
      for (; t + 2 <= taps; t += 2) {
        const int8x8_t f0 = vld1_s8(wt + t * C + c0), f1 = vld1_s8(wt + (t + 1) * C + c0);
        const int8_t *s0 = src[t] + c0, *s1 = src[t + 1] + c0;
        for (int j = 0; j < P; ++j) mac8<true>(acc[j], vld1_s8(s0 + j * step), f0, vld1_s8(s1 + j * step), f1);
      }
    }
    for (; t < taps; ++t) {
      const int8x8_t f = vld1_s8(wt + t * C + c0);
      const int8_t* s0 = src[t] + c0;
      for (int j = 0; j < P; ++j) mac8<false>(acc[j], vld1_s8(s0 + j * step), f, f, f);
    }
    int8x8_t v[P];
    for (int j = 0; j < P; ++j) v[j] = requantize8(acc[j][0], acc[j][1], q, c0);
    for (int j = 0; j < P; ++j) vst1_s8(o + j * o_step + c0, v[j]);
  }
}

template <bool kPairs>
void run(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  const Output q(w.requantization(), w.neon_float_requantization());
  const size_t oc = g.in_c * g.depth_multiplier, full = oc / 8 * 8, taps = g.k_h * g.k_w;
  DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
  std::vector<const int8_t*> rp(g.k_h), src(taps);
  const ptrdiff_t in_w = static_cast<ptrdiff_t>(g.in_w), stride = static_cast<ptrdiff_t>(g.stride_w);
  const ptrdiff_t reach = static_cast<ptrdiff_t>((g.k_w - 1) * g.dilation_w);  // last tap's column offset
  const size_t step = g.stride_w * oc;
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp.data());
      for (size_t ox = 0; ox < g.out_w;) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox) * stride - g.pad_left;
        for (size_t ky = 0, t = 0; ky < g.k_h; ++ky) {
          for (size_t kx = 0; kx < g.k_w; ++kx, ++t) {
            const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
            src[t] = ix >= 0 && ix < in_w ? rp[ky] + ix * static_cast<ptrdiff_t>(oc) : rows.zero_row();
          }
        }
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * oc;
        // two pixels whose windows both lie within the row: the second's taps are the first's + step
        const size_t n = ox + 1 < g.out_w && ix0 >= 0 && ix0 + stride + reach < in_w ? 2 : 1;
        if (n == 2) {
          pixels<kPairs, 2>(w, src.data(), step, taps, full, q, o, oc);
        } else {
          pixels<kPairs, 1>(w, src.data(), step, taps, full, q, o, oc);
        }
        for (size_t j = 0; j < n && full < oc; ++j)
          dwconv_pixel_channels(w, g, in, b, oy, ox + j, full, oc, o + j * oc);
        ox += n;
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
