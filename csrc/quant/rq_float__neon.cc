// The NEON check of the float form of the requantization (rq_float.h): the kernels' own
// instructions (SCVTF, FMLA, FCVTNS) against the fixed-point requantization of
// neon_inl.h (or its double form), 8 accumulators at a time.
#include <arm_neon.h>

#include "neon_inl.h"
#include "rq_float.h"
#include "rq_neon_inl.h"

namespace edgeinf::qs8 {
namespace {

bool exact_on(const float_fit::Channel& ch, float scale, float offset, int64_t x0, int64_t x1, int64_t* budget) {
  const int32x4_t m = vdupq_n_s32(ch.multiplier), l = vdupq_n_s32(ch.left_shift);
  const int32x4_t nr = vdupq_n_s32(-ch.right_shift), zp = vdupq_n_s32(ch.zero_point);
  const int32x4_t lo = vdupq_n_s32(-128), hi = vdupq_n_s32(127);
  const float32x4_t s = vdupq_n_f32(scale), o = vdupq_n_f32(offset);
  const double dscale[4] = {ch.scale, ch.scale, ch.scale, ch.scale};
  const int32x4_t last = vdupq_n_s32(static_cast<int32_t>(x1)), four = vdupq_n_s32(4);
  static constexpr int32_t kLanes[4] = {0, 1, 2, 3};
  int32x4_t x = vaddq_s32(vdupq_n_s32(static_cast<int32_t>(x0)), vld1q_s32(kLanes));
  auto mismatch = [&](int32x4_t xc) {
    const int32x4_t want = ch.scale > 0 ? neon::requantize_double(xc, dscale, zp, lo, hi)
                                        : vminq_s32(vmaxq_s32(vaddq_s32(neon::mbqm(xc, m, l, nr), zp), lo), hi);
    const int32x4_t got = vminq_s32(vmaxq_s32(neon_rq::float_form(xc, s, o), lo), hi);
    return vminvq_u32(vceqq_s32(want, got)) == 0;
  };
  for (int64_t i = x0; i <= x1; i += 8) {
    *budget -= 8;
    const int32x4_t xa = vminq_s32(x, last);
    x = vaddq_s32(x, four);
    const int32x4_t xb = vminq_s32(x, last);
    x = vaddq_s32(x, four);
    if (mismatch(xa) || mismatch(xb)) return false;
  }
  return true;
}

}  // namespace

float_fit::Check float_fit::check__neon() { return neon_rq::rounds_to_nearest() ? &exact_on : nullptr; }

}  // namespace edgeinf::qs8
