// NEON depthwise conv2d: 16 (then 8) channels per step, raw int8 inputs times int8
// weights, in halves of 8 channels.
//
// VMULL gives exact int16 products (at most 128 * 128). When no weight is -128, a second
// tap is added in int16 by VMLAL (|sum| <= 2 * 128 * 127 < 2^15), halving the widening
// adds (VADDW) into the int32 accumulators; otherwise every tap is widened on its own.
// Multiplies take 64-bit halves (8 channels), which the Cortex-A53's 64-bit datapath runs
// in one pass. The zero point enters as bias - zp * sum(w), so a padded tap, which reads
// the zero point, adds zp * w - zp * w = 0 like the reference's skipped tap, and the total
// equals the reference accumulator modulo 2^32 (in any order of the taps: an odd tap count
// takes the first tap alone). A depth multiplier above 1 reads rows with repeated channels
// (DwRows), so it runs the same code.
#include <arm_neon.h>

#include <vector>

#include "../../quant/rq_neon_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {
namespace {

using neon_rq::Output;

// The products of 8 channels of one tap (x0, f0), and with kSecond of a second one added
// in int16, widened into lo (channels 0-3) and hi (4-7).
template <bool kSecond>
inline void mac8(int32x4_t& lo, int32x4_t& hi, int8x8_t x0, int8x8_t f0, int8x8_t x1, int8x8_t f1) {
  int16x8_t p = vmull_s8(x0, f0);
  if (kSecond) p = vmlal_s8(p, x1, f1);
  lo = vaddw_s16(lo, vget_low_s16(p));
  hi = vaddw_high_s16(hi, p);
}

// Outputs c0 .. c0 + 8H of P adjacent pixels (P = 1 or 2): src[t] points at pixel 0's input
// of tap t, pixel j's at src[t] + j * step; outputs o + j * o_step. The pixels share each
// weight load, and their results are stored only after all are requantized, so that the
// requantization's parameters are loaded once (an int8 store may alias them). The tap
// count as compiled (kTaps) or, where that is 0, as given.
template <bool kPairs, size_t kTaps, int P, int H>
inline void pixels(const DwWeights& w, const int8_t* const* src, size_t step, size_t given_taps, const Output& q,
                   size_t c0, int8_t* o, size_t o_step) {
  const size_t taps = kTaps ? kTaps : given_taps;
  const int8_t* wt = w.neon_panel() + c0 / 16 * taps * 16;  // the block's weights, 16 per tap
  int32x4_t acc[P][2 * H];
  for (int i = 0; i < 2 * H; ++i) {
    const int32x4_t s = vld1q_s32(w.bias_minus_zero_point_terms() + c0 + 4 * i);
    for (int j = 0; j < P; ++j) acc[j][i] = s;
  }
  // taps alone: all of them, or the first of an odd count, so that the rest pair up
  const size_t single = kPairs ? taps % 2 : taps;
  for (size_t t = 0; t < single; ++t) {
    for (int h = 0; h < H; ++h) {
      const int8x8_t f = vld1_s8(wt + t * 16 + 8 * h);
      for (int j = 0; j < P; ++j)
        mac8<false>(acc[j][2 * h], acc[j][2 * h + 1], vld1_s8(src[t] + c0 + j * step + 8 * h), f, f, f);
    }
  }
  for (size_t t = single; t < taps; t += 2) {
    const int8_t *s0 = src[t] + c0, *s1 = src[t + 1] + c0;
    for (int h = 0; h < H; ++h) {
      const int8x8_t f0 = vld1_s8(wt + t * 16 + 8 * h), f1 = vld1_s8(wt + (t + 1) * 16 + 8 * h);
      for (int j = 0; j < P; ++j)
        mac8<true>(acc[j][2 * h], acc[j][2 * h + 1], vld1_s8(s0 + j * step + 8 * h), f0, vld1_s8(s1 + j * step + 8 * h),
                   f1);
    }
  }
  if constexpr (H == 2) {
    int8x16_t v[P];
    for (int j = 0; j < P; ++j) v[j] = neon_rq::requantize16(acc[j], q, c0);
    for (int j = 0; j < P; ++j) vst1q_s8(o + j * o_step + c0, v[j]);
  } else {
    int8x8_t v[P];
    for (int j = 0; j < P; ++j) v[j] = neon_rq::requantize8(acc[j][0], acc[j][1], q, c0);
    for (int j = 0; j < P; ++j) vst1_s8(o + j * o_step + c0, v[j]);
  }
}

// Channels [0, full) (a multiple of 8) of P adjacent pixels.
template <bool kPairs, size_t kTaps, int P>
void pixel_channels(const DwWeights& w, const int8_t* const* src, size_t step, size_t taps, size_t full,
                    const Output& q, int8_t* o, size_t o_step) {
  size_t c0 = 0;
  for (; c0 + 16 <= full; c0 += 16) pixels<kPairs, kTaps, P, 2>(w, src, step, taps, q, c0, o, o_step);
  if (c0 < full) pixels<kPairs, kTaps, P, 1>(w, src, step, taps, q, c0, o, o_step);
}

template <bool kPairs, size_t kTaps>
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
          pixel_channels<kPairs, kTaps, 2>(w, src.data(), step, taps, full, q, o, oc);
        } else {
          pixel_channels<kPairs, kTaps, 1>(w, src.data(), step, taps, full, q, o, oc);
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
  // 3x3 and 5x5 filters (the face models') unrolled, any other as given
  const size_t taps = g.k_h * g.k_w;
  if (w.weights_above_min()) {
    if (taps == 9) return run<true, 9>(w, g, in, out);
    if (taps == 25) return run<true, 25>(w, g, in, out);
    return run<true, 0>(w, g, in, out);
  }
  run<false, 0>(w, g, in, out);
}

}  // namespace edgeinf::qs8
