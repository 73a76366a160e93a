// NEON table lookup: four 64-byte TBL/TBX lookups cover the 256 entries.
#include <arm_neon.h>

#include "logistic.h"

namespace edgeinf::qs8 {

void qs8_lut__neon(const int8_t* in, int8_t* out, size_t n, const int8_t table[256]) {
  const uint8_t* t = reinterpret_cast<const uint8_t*>(table);
  const uint8x16x4_t t0 = vld1q_u8_x4(t), t1 = vld1q_u8_x4(t + 64), t2 = vld1q_u8_x4(t + 128),
                     t3 = vld1q_u8_x4(t + 192);
  const uint8x16_t step = vdupq_n_u8(64);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint8x16_t idx = vld1q_u8(reinterpret_cast<const uint8_t*>(in + i));
    uint8x16_t r = vqtbl4q_u8(t0, idx);  // indices >= 64 give 0 here and are filled below
    idx = vsubq_u8(idx, step);
    r = vqtbx4q_u8(r, t1, idx);  // TBX leaves lanes with out-of-range indices unchanged
    idx = vsubq_u8(idx, step);
    r = vqtbx4q_u8(r, t2, idx);
    idx = vsubq_u8(idx, step);
    r = vqtbx4q_u8(r, t3, idx);
    vst1q_u8(reinterpret_cast<uint8_t*>(out + i), r);
  }
  for (; i < n; ++i) out[i] = table[static_cast<uint8_t>(in[i])];
}

}  // namespace edgeinf::qs8
