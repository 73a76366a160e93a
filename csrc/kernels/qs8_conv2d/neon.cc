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
#include <utility>

#include "../../quant/rq_neon_inl.h"
#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

using neon_rq::Output;
using neon_rq::requantize8;

constexpr size_t kRows = 6;

// Pair L (0-7) of the 16 K values of each row in av against the 8 channels of a panel
// step: the pair in every 16-bit lane (DUP), 64-bit operands (one pass on the A53's
// 64-bit datapath), VPADAL adding each pair's two products into int32.
template <int L>
inline void pair(int32x4_t (&acc)[kRows][2], const int16x8_t (&av)[kRows], const int8_t* panel) {
  const int8x8_t b0 = vld1_s8(panel), b1 = vld1_s8(panel + 8);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    const int8x8_t x = vreinterpret_s8_s16(vdup_laneq_s16(av[r], L));
    acc[r][0] = vpadalq_s16(acc[r][0], vmull_s8(x, b0));
    acc[r][1] = vpadalq_s16(acc[r][1], vmull_s8(x, b1));
  }
}

// The first n (1-8) pairs of a step of 16 K values.
template <int... L>
inline void pairs(int32x4_t (&acc)[kRows][2], const int16x8_t (&av)[kRows], const int8_t* panel, size_t n,
                  std::integer_sequence<int, L...>) {
  ((static_cast<size_t>(L) < n ? pair<L>(acc, av, panel + 16 * L) : void()), ...);
}

// a: kRows rows of kp int8 (kp even), readable 16 bytes past the last row.
void tile(const int8_t* a, size_t kp, const int8_t* panel, const int32_t* start, const Output& q, size_t c0,
          size_t rows, size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[kRows][2];
  const int32x4_t s0 = vld1q_s32(start + c0), s1 = vld1q_s32(start + c0 + 4);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
  for (size_t k = 0; k < kp; k += 16, panel += 128) {
    int16x8_t av[kRows];
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) av[r] = vreinterpretq_s16_s8(vld1q_s8(a + r * kp + k));
    pairs(acc, av, panel, std::min<size_t>(8, (kp - k) / 2), std::make_integer_sequence<int, 8>());
  }
  for (size_t r = 0; r < rows; ++r) {
    neon::store_prefix(out + r * out_stride, requantize8(acc[r][0], acc[r][1], q, c0), ncols);
  }
}

}  // namespace

void qs8_conv2d_direct__neon(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t n = g.out_c, kp = w.kp2(), blocks = (n + 7) / 8;
  const Output q(w.gemm().requantization(), w.gemm().float_requantization());
  const int32_t* start = w.gemm().bias_minus_zero_point_terms();
  for_each_window_tile(g, in, static_cast<int8_t>(w.input_zero_point()), kp, kRows,
                       [&](const int8_t* a, size_t rows, size_t pixel) {
                         for (size_t b = 0; b < blocks; ++b) {
                           tile(a, kp, w.neon_panel() + b * kp * 8, start, q, b * 8, rows,
                                std::min<size_t>(8, n - b * 8), out + pixel * n + b * 8, n);
                         }
                       });
}

}  // namespace edgeinf::qs8
