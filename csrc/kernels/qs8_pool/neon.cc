// NEON pooling over 16 channels per step; channel tails and oversized average windows
// take the scalar path for those outputs.
#include <arm_neon.h>

#include <algorithm>

#include "pool.h"

namespace edgeinf::qs8 {
namespace {

template <bool kMax>
void pixel_tail(const PoolGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox, size_t c0, size_t c1,
                int8_t* o) {
  size_t y0, y1, x0, x1;
  pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
  pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
  const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
  const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
  const int32_t count = static_cast<int32_t>((y1 - y0) * (x1 - x0));
  for (size_t c = c0; c < c1; ++c) {
    int32_t acc = kMax ? -128 : 0;
    for (size_t fy = y0; fy < y1; ++fy) {
      for (size_t fx = x0; fx < x1; ++fx) {
        const int32_t v = in[((b * g.in_h + static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy))) * g.in_w +
                              static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx))) *
                                 g.channels +
                             c];
        acc = kMax ? std::max(acc, v) : acc + v;
      }
    }
    if (!kMax) acc = average_rounded(acc, count);
    o[c] = static_cast<int8_t>(std::min(std::max(acc, g.act_min), g.act_max));
  }
}

// (sum +- count/2) / count truncated, through float: exact for |sum| < 2^22.
inline int32x4_t average4(int32x4_t sum, int32x4_t half, float32x4_t count_f) {
  const int32x4_t negative = vreinterpretq_s32_u32(vcltq_s32(sum, vdupq_n_s32(0)));
  const int32x4_t numer = vaddq_s32(sum, vsubq_s32(veorq_s32(half, negative), negative));
  return vcvtq_s32_f32(vdivq_f32(vcvtq_f32_s32(numer), count_f));
}

template <bool kMax>
void pool(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  const size_t C = g.channels, full = C / 16 * 16;
  const int32x4_t lo = vdupq_n_s32(g.act_min), hi = vdupq_n_s32(g.act_max);
  const int8x16_t lo8 = vdupq_n_s8(static_cast<int8_t>(g.act_min)), hi8 = vdupq_n_s8(static_cast<int8_t>(g.act_max));
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      size_t y0, y1;
      pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        size_t x0, x1;
        pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * C;
        const size_t count = (y1 - y0) * (x1 - x0);
        size_t simd_end = full;
        if (!kMax && count > kMaxSimdAverageWindow) simd_end = 0;
        for (size_t c0 = 0; c0 < simd_end; c0 += 16) {
          int8x16_t m = vdupq_n_s8(-128);
          int32x4_t s[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
          for (size_t fy = y0; fy < y1; ++fy) {
            const size_t iy = static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy));
            const int8_t* row = in + ((b * g.in_h + iy) * g.in_w) * C + c0;
            for (size_t fx = x0; fx < x1; ++fx) {
              const size_t ix = static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx));
              const int8x16_t v = vld1q_s8(row + ix * C);
              if (kMax) {
                m = vmaxq_s8(m, v);
              } else {
                const int16x8_t l = vmovl_s8(vget_low_s8(v)), h = vmovl_high_s8(v);
                s[0] = vaddw_s16(s[0], vget_low_s16(l));
                s[1] = vaddw_high_s16(s[1], l);
                s[2] = vaddw_s16(s[2], vget_low_s16(h));
                s[3] = vaddw_high_s16(s[3], h);
              }
            }
          }
          int8x16_t r;
          if (kMax) {
            r = vminq_s8(vmaxq_s8(m, lo8), hi8);
          } else {
            const int32x4_t half = vdupq_n_s32(static_cast<int32_t>(count / 2));
            const float32x4_t cf = vdupq_n_f32(static_cast<float>(count));
            int32x4_t a[4];
            for (int i = 0; i < 4; ++i) a[i] = vminq_s32(vmaxq_s32(average4(s[i], half, cf), lo), hi);
            const int16x8_t w0 = vcombine_s16(vmovn_s32(a[0]), vmovn_s32(a[1]));
            const int16x8_t w1 = vcombine_s16(vmovn_s32(a[2]), vmovn_s32(a[3]));
            r = vcombine_s8(vmovn_s16(w0), vmovn_s16(w1));
          }
          vst1q_s8(o + c0, r);
        }
        if (simd_end < C) pixel_tail<kMax>(g, in, b, oy, ox, simd_end, C, o);
      }
    }
  }
}

}  // namespace

void qs8_maxpool__neon(const PoolGeometry& g, const int8_t* in, int8_t* out) { pool<true>(g, in, out); }
void qs8_avgpool__neon(const PoolGeometry& g, const int8_t* in, int8_t* out) { pool<false>(g, in, out); }

}  // namespace edgeinf::qs8
