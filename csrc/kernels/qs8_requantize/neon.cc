// NEON requantization: 8 channels per step; the tail goes through the scalar helper.
#include "../../quant/neon_inl.h"
#include "requantize.h"

namespace edgeinf::qs8 {

void qs8_requantize__neon(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq) {
  using namespace neon;
  const int32x4_t zp = vdupq_n_s32(rq.output_zero_point);
  const int32x4_t lo = vdupq_n_s32(rq.act_min);
  const int32x4_t hi = vdupq_n_s32(rq.act_max);
  for (size_t r = 0; r < rows; ++r) {
    const int32_t* a = acc + r * channels;
    int8_t* o = out + r * channels;
    size_t c = 0;
    for (; c + 8 <= channels; c += 8) {
      int32x4_t v[2];
      for (int h = 0; h < 2; ++h) {
        const size_t i = c + 4 * h;
        v[h] = requantize(vld1q_s32(a + i), vld1q_s32(rq.multiplier.data() + i), vld1q_s32(rq.left_shift.data() + i),
                          vnegq_s32(vld1q_s32(rq.right_shift.data() + i)), zp, lo, hi);
      }
      vst1_s8(o + c, pack8(v[0], v[1]));
    }
    for (; c < channels; ++c) o[c] = requantize_one(a[c], rq, c);
  }
}

}  // namespace edgeinf::qs8
