// NEON requantization of 8 accumulators in channel order (int32x4 x 2) with the
// per-channel parameters of a Requantization (padded to whole blocks), bit-exact with
// requantize.h. Include only from files compiled for aarch64 (neon.cc / neondot.cc).
#pragma once

#include <arm_neon.h>

#include "neon_inl.h"
#include "requantization.h"

namespace edgeinf::qs8::neon_rq {

struct Output {
  const Requantization& rq;
  int32x4_t zero_point, lo, hi;
  explicit Output(const Requantization& r)
      : rq(r), zero_point(vdupq_n_s32(r.output_zero_point)), lo(vdupq_n_s32(r.act_min)), hi(vdupq_n_s32(r.act_max)) {}
};

// Channels c .. c + 7 from accumulators a0 (c .. c + 3) and a1 (c + 4 .. c + 7).
static inline int8x8_t requantize8(int32x4_t a0, int32x4_t a1, const Output& q, size_t c) {
  const Requantization& rq = q.rq;
  const int32x4_t v0 = neon::requantize(a0, vld1q_s32(rq.multiplier.data() + c), vld1q_s32(rq.left_shift.data() + c),
                                        vnegq_s32(vld1q_s32(rq.right_shift.data() + c)), q.zero_point, q.lo, q.hi);
  const int32x4_t v1 =
      neon::requantize(a1, vld1q_s32(rq.multiplier.data() + c + 4), vld1q_s32(rq.left_shift.data() + c + 4),
                       vnegq_s32(vld1q_s32(rq.right_shift.data() + c + 4)), q.zero_point, q.lo, q.hi);
  return neon::pack8(v0, v1);
}

}  // namespace edgeinf::qs8::neon_rq
