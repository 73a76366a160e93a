// NEON direct conv2d for few input channels (conv2d.h), without the dot-product
// extension (Cortex-A53/A72): 6 output pixels x 8 output channels per tile.
//
// Window rows hold raw int8 inputs (padded taps as the input zero point); VMULL gives
// exact int16 products of a pair of K values and 8 channels (VMLAL adds a second pair's
// where no weight is -128), VPADAL adds each pair into int32. Accumulators start from bias - zero_point * sum(w), so a
// padded tap adds zp * w - zp * w = 0 like the reference's skipped tap; the total equals the reference accumulator
// modulo 2^32.
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

// The next two K pairs of a row, each broadcast to the four 16-bit lanes of a 64-bit
// register, advancing p by 4: LD1R loads, post-indexed. Written out: for the same
// intrinsics GCC indexes the six rows from one counter, and LD1R has no register-offset
// form, so it emits a scalar load and a DUP (a NEON issue slot) per pair.
inline void load_two_pairs(const int8_t*& p, int8x8_t& x0, int8x8_t& x1) {
  __asm__ volatile("ld1r {%0.4h}, [%2], #2\n\tld1r {%1.4h}, [%2], #2" : "=&w"(x0), "=w"(x1), "+r"(p) :);
}

// Two K pairs (p, p + 1) of three rows against the 8 channels of their two panel steps
// (w0 w1: pair p, channels 0-3 and 4-7; w2 w3: pair p + 1): VMULL of the first pair,
// VMLAL of the second into the same int16 lanes, one VPADAL. |x * w| <= 128 * 127
// without a weight of -128, so the two products fit int16; half the VPADALs of `pair`,
// which the A53 runs in two passes. Written as waves over the three rows (all loads,
// then the multiplies, then the accumulates), so that an in-order core has independent
// work while a load or a multiply is in flight.
#define EDGEINF_TWO_PAIRS_3(ra, rb, rc, a0, a1, b0, b1, c0, c1)                               \
  {                                                                                           \
    int8x8_t xa0, xa1, xb0, xb1, xc0, xc1;                                                    \
    load_two_pairs(ra, xa0, xa1);                                                             \
    load_two_pairs(rb, xb0, xb1);                                                             \
    load_two_pairs(rc, xc0, xc1);                                                             \
    int16x8_t pa0 = vmull_s8(xa0, w0), pa1 = vmull_s8(xa0, w1), pb0 = vmull_s8(xb0, w0);      \
    int16x8_t pb1 = vmull_s8(xb0, w1), pc0 = vmull_s8(xc0, w0), pc1 = vmull_s8(xc0, w1);      \
    pa0 = vmlal_s8(pa0, xa1, w2), pa1 = vmlal_s8(pa1, xa1, w3), pb0 = vmlal_s8(pb0, xb1, w2); \
    pb1 = vmlal_s8(pb1, xb1, w3), pc0 = vmlal_s8(pc0, xc1, w2), pc1 = vmlal_s8(pc1, xc1, w3); \
    a0 = vpadalq_s16(a0, pa0), a1 = vpadalq_s16(a1, pa1), b0 = vpadalq_s16(b0, pb0);          \
    b1 = vpadalq_s16(b1, pb1), c0 = vpadalq_s16(c0, pc0), c1 = vpadalq_s16(c1, pc1);          \
  }

// Channels c .. c + 7 of the float form, saturated to int8 and clamped there (two
// clamps of 8 lanes where the int32 clamp takes four of 4; the activation range lies
// within int8); otherwise requantize8.
template <bool kFloat>
inline int8x8_t requantize_row(int32x4_t a0, int32x4_t a1, const Output& q, size_t c) {
  if constexpr (kFloat) {
    int32x4_t v0, v1;
    const float32x4_t s0 = vld1q_f32(q.scale + c), s1 = vld1q_f32(q.scale + c + 4);
    if (q.split) {
      v0 = neon_rq::float_form_split(a0, s0, vld1q_f32(q.offset + c), vld1q_f32(q.offset_neg + c));
      v1 = neon_rq::float_form_split(a1, s1, vld1q_f32(q.offset + c + 4), vld1q_f32(q.offset_neg + c + 4));
    } else {
      v0 = neon_rq::float_form(a0, s0, vld1q_f32(q.offset + c));
      v1 = neon_rq::float_form(a1, s1, vld1q_f32(q.offset + c + 4));
    }
    const int8x8_t b = vqmovn_s16(vcombine_s16(vqmovn_s32(v0), vqmovn_s32(v1)));
    return vmin_s8(vmax_s8(b, vget_low_s8(q.lo8)), vget_low_s8(q.hi8));
  } else {
    return requantize8(a0, a1, q, c);
  }
}

// a: kRows rows of kp int8 (kp even), readable 16 bytes past the last row. kPaired: no
// weight is -128 (two_pairs).
template <bool kPaired, bool kFloat>
void tile(const int8_t* a, size_t kp, const int8_t* panel, const int32_t* start, const Output& q, size_t c0,
          size_t rows, size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[kRows][2];
  const int32x4_t s0 = vld1q_s32(start + c0), s1 = vld1q_s32(start + c0 + 4);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
  size_t k = 0;
  if constexpr (kPaired) {
    static_assert(kRows == 6, "the loop names six rows");
    const int8_t *r0 = a, *r1 = a + kp, *r2 = a + 2 * kp, *r3 = a + 3 * kp, *r4 = a + 4 * kp, *r5 = a + 5 * kp;
    for (; k + 4 <= kp; k += 4, panel += 32) {
      const int8x8_t w0 = vld1_s8(panel), w1 = vld1_s8(panel + 8), w2 = vld1_s8(panel + 16), w3 = vld1_s8(panel + 24);
      EDGEINF_TWO_PAIRS_3(r0, r1, r2, acc[0][0], acc[0][1], acc[1][0], acc[1][1], acc[2][0], acc[2][1])
      EDGEINF_TWO_PAIRS_3(r3, r4, r5, acc[3][0], acc[3][1], acc[4][0], acc[4][1], acc[5][0], acc[5][1])
    }
  }
  for (; k < kp; k += 16, panel += 128) {
    int16x8_t av[kRows];
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) av[r] = vreinterpretq_s16_s8(vld1q_s8(a + r * kp + k));
    pairs(acc, av, panel, std::min<size_t>(8, (kp - k) / 2), std::make_integer_sequence<int, 8>());
  }
  // Every row requantized (rows past `rows` hold zero windows), then the real ones stored:
  // six independent chains of conversions, which an in-order core interleaves as
  // scheduled, where a loop up to `rows` would run them one after the other.
  int8x8_t bytes[kRows];
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) bytes[r] = requantize_row<kFloat>(acc[r][0], acc[r][1], q, c0);
  for (size_t r = 0; r < rows; ++r) neon::store_prefix(out + r * out_stride, bytes[r], ncols);
}

#undef EDGEINF_TWO_PAIRS_3

template <bool kPaired, bool kFloat>
void run(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out, const Output& q) {
  const size_t n = g.out_c, kp = w.kp2(), blocks = (n + 7) / 8;
  const int32_t* start = w.gemm().bias_minus_zero_point_terms();
  for_each_window_tile(g, in, static_cast<int8_t>(w.input_zero_point()), kp, kRows,
                       [&](const int8_t* a, size_t rows, size_t pixel) {
                         for (size_t b = 0; b < blocks; ++b) {
                           tile<kPaired, kFloat>(a, kp, w.neon_panel() + b * kp * 8, start, q, b * 8, rows,
                                                 std::min<size_t>(8, n - b * 8), out + pixel * n + b * 8, n);
                         }
                       });
}

}  // namespace

void qs8_conv2d_direct__neon(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const Output q(w.gemm().requantization(), w.gemm().float_requantization());
  const bool paired = w.gemm().weights_negatable(), floating = q.scale != nullptr;
  if (paired) {
    floating ? run<true, true>(w, g, in, out, q) : run<true, false>(w, g, in, out, q);
  } else {
    floating ? run<false, true>(w, g, in, out, q) : run<false, false>(w, g, in, out, q);
  }
}

}  // namespace edgeinf::qs8
