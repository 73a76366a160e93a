// NEON direct conv2d for few input channels (conv2d.h), without the dot-product
// extension (Cortex-A53/A72): 6 output pixels x 8 output channels per tile.
//
// Window rows hold raw int8 inputs (padded taps as the input zero point); VMULL gives
// exact int16 products of a pair of K values and 8 channels, VPADAL adds each pair into
// int32. Accumulators start from bias - zero_point * sum(w), so a padded tap adds
// zp * w - zp * w = 0 like the reference's skipped tap; the total equals the reference
// accumulator modulo 2^32.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../../quant/rq_neon_inl.h"
#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

using neon_rq::Output;
using neon_rq::requantize8;

constexpr size_t kRows = 6;

void tile(const int8_t* a, size_t kp, const int8_t* panel, const int32_t* start, const Output& q, size_t c0,
          size_t rows, size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[kRows][2];
  const int32x4_t s0 = vld1q_s32(start + c0), s1 = vld1q_s32(start + c0 + 4);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
  for (size_t k = 0; k < kp; k += 2, panel += 16) {
    const int8x16_t bv = vld1q_s8(panel);
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) {
      int16_t pair;
      std::memcpy(&pair, a + r * kp + k, sizeof(pair));
      const int8x16_t av = vreinterpretq_s8_s16(vdupq_n_s16(pair));
      acc[r][0] = vpadalq_s16(acc[r][0], vmull_s8(vget_low_s8(av), vget_low_s8(bv)));
      acc[r][1] = vpadalq_s16(acc[r][1], vmull_high_s8(av, bv));
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    const int8x8_t v = requantize8(acc[r][0], acc[r][1], q, c0);
    if (ncols == 8) {
      vst1_s8(out + r * out_stride, v);
    } else {
      int8_t tmp[8];
      vst1_s8(tmp, v);
      std::memcpy(out + r * out_stride, tmp, ncols);
    }
  }
}

}  // namespace

void qs8_conv2d_direct__neon(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t n = g.out_c, kp = w.kp2(), blocks = (n + 7) / 8;
  const size_t pixels = g.batch * g.out_h * g.out_w;
  const size_t chunk =
      std::min<size_t>(std::max<size_t>(kRows, (16384 / kp) / kRows * kRows), (pixels + kRows - 1) / kRows * kRows);
  std::vector<int8_t> a(chunk * kp, 0);
  const Output q(w.gemm().requantization(), w.gemm().float_requantization());
  const int32_t* start = w.gemm().bias_minus_zero_point_terms();
  const int8_t zp = static_cast<int8_t>(w.input_zero_point());
  for (size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const size_t m = std::min(chunk, pixels - p0);
    conv_window_rows(g, in, zp, p0, m, kp, a.data());
    std::fill(a.begin() + static_cast<ptrdiff_t>(m * kp), a.end(), int8_t{0});  // rows past m: computed, not stored
    for (size_t r0 = 0; r0 < m; r0 += kRows) {
      const size_t rows = std::min(kRows, m - r0);
      for (size_t b = 0; b < blocks; ++b) {
        tile(a.data() + r0 * kp, kp, w.neon_panel() + b * kp * 8, start, q, b * 8, rows, std::min<size_t>(8, n - b * 8),
             out + (p0 + r0) * n + b * 8, n);
      }
    }
  }
}

}  // namespace edgeinf::qs8
