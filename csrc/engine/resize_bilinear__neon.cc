// RESIZE_BILINEAR rows on NEON: 8 channels per step (resize_bilinear.h); channel counts
// that are not a multiple of 8 end with the scalar formula.
//
// The four products are summed in two passes: per column the vertical blend
// (1024 - wy) * row0 + wy * row1 (int16 weights, products widened to int32), then the two
// columns weighted (1024 - wx) and wx. Integer sums do not round, so this equals the
// reference's w00 * a0 + w10 * b0 + w01 * a1 + w11 * b1 while no sum leaves int32: with
// weights in [-1024, 2048] (half-pixel centers give -512 at the edges) every sum stays
// within 128 * 3072^2 < 2^31. Rows with other weights take the scalar path.
#include <arm_neon.h>

#include "resize_bilinear.h"

namespace edgeinf::engine {

namespace {

// bilinear_round on 4 lanes: SRSHR rounds ties toward +inf, so a negative sum first moves
// down by one (ties away from zero, as the reference's +-2^19 before truncation).
inline int32x4_t round4(int32x4_t sum) { return vrshrq_n_s32(vsraq_n_s32(sum, sum, 31), 20); }

bool weights_fit(const BilinearRow& r) {
  auto fits = [](int32_t w) { return w >= -1024 && w <= 2048; };
  if (!fits(r.wy)) return false;
  for (size_t ox = 0; ox < r.out_w; ++ox) {
    if (!fits(r.wx[ox])) return false;
  }
  return true;
}

}  // namespace

void bilinear_row__neon(const BilinearRow& r, int8_t* out) {
  if (r.channels < 8 || !weights_fit(r)) return bilinear_row__scalar(r, out);
  const size_t channels = r.channels, full = channels / 8 * 8;
  const int16x4_t top = vdup_n_s16(static_cast<int16_t>(1024 - r.wy)), bottom = vdup_n_s16(static_cast<int16_t>(r.wy));
  // The vertical blend of 8 channels from the two rows at p (int32, two vectors).
  auto blend = [&](const int8_t* a, const int8_t* b, int32x4_t v[2]) {
    const int16x8_t x = vmovl_s8(vld1_s8(a)), y = vmovl_s8(vld1_s8(b));
    v[0] = vmlal_s16(vmull_s16(vget_low_s16(x), top), vget_low_s16(y), bottom);
    v[1] = vmlal_s16(vmull_s16(vget_high_s16(x), top), vget_high_s16(y), bottom);
  };
  for (size_t ox = 0; ox < r.out_w; ++ox) {
    const int32_t wx = r.wx[ox];
    const int32x4_t left = vdupq_n_s32(1024 - wx), right = vdupq_n_s32(wx);
    const size_t x0 = static_cast<size_t>(r.x0[ox]) * channels, x1 = static_cast<size_t>(r.x1[ox]) * channels;
    int8_t* o = out + ox * channels;
    for (size_t c = 0; c < full; c += 8) {
      int32x4_t v0[2], v1[2];
      blend(r.row0 + x0 + c, r.row1 + x0 + c, v0);
      blend(r.row0 + x1 + c, r.row1 + x1 + c, v1);
      const int32x4_t lo = round4(vmlaq_s32(vmulq_s32(v0[0], left), v1[0], right));
      const int32x4_t hi = round4(vmlaq_s32(vmulq_s32(v0[1], left), v1[1], right));
      vst1_s8(o + c, vmovn_s16(vcombine_s16(vmovn_s32(lo), vmovn_s32(hi))));  // values within int8
    }
    const int32_t wy = r.wy;
    const int32_t w00 = (1024 - wy) * (1024 - wx), w10 = wy * (1024 - wx), w01 = (1024 - wy) * wx, w11 = wy * wx;
    for (size_t c = full; c < channels; ++c) {
      o[c] = bilinear_round(r.row0[x0 + c] * w00 + r.row1[x0 + c] * w10 + r.row0[x1 + c] * w01 + r.row1[x1 + c] * w11);
    }
  }
}

}  // namespace edgeinf::engine
