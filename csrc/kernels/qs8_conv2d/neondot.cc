// NEON direct conv2d for few input channels (conv2d.h) with the dot-product extension
// (Cortex-A76 and later): 4 output pixels x 16 output channels per tile, SDOT over
// quads of K values.
//
// Window rows hold raw int8 inputs (padded taps as the input zero point), K padded with
// zeros; SDOT sums four exact int8 products into each int32 lane. Accumulators start
// from bias - zero_point * sum(w), so a padded tap adds zp * w - zp * w = 0 like the
// reference's skipped tap; the total equals the reference accumulator modulo 2^32.
#include <arm_neon.h>

#include <algorithm>

#include "../../quant/rq_neon_inl.h"
#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

using neon_rq::Output;

constexpr size_t kRows = 4;

// Quad `L` (0-3) of the 16 K values in av against the 16 channels of panel p.
#define EDGEINF_DOT_QUAD(L)                                       \
  do {                                                            \
    const int8x16_t b0 = vld1q_s8(p), b1 = vld1q_s8(p + 16);      \
    const int8x16_t b2 = vld1q_s8(p + 32), b3 = vld1q_s8(p + 48); \
    p += 64;                                                      \
    _Pragma("GCC unroll 4") for (size_t r = 0; r < kRows; ++r) {  \
      acc[r][0] = vdotq_laneq_s32(acc[r][0], b0, av[r], L);       \
      acc[r][1] = vdotq_laneq_s32(acc[r][1], b1, av[r], L);       \
      acc[r][2] = vdotq_laneq_s32(acc[r][2], b2, av[r], L);       \
      acc[r][3] = vdotq_laneq_s32(acc[r][3], b3, av[r], L);       \
    }                                                             \
  } while (0)

// a: kRows rows of ka int8 (ka a multiple of 16, zero past K); quads: K / 4 rounded up.
// F: q's requantization form (neon_rq::form_of).
template <neon_rq::Form F>
void tile(const int8_t* a, size_t ka, size_t quads, const int8_t* panel, const int32_t* start, const Output& q,
          size_t c0, size_t rows, size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[kRows][4];
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
    // Each row's start values loaded anew (the empty asm hides that the address repeats):
    // copies of one load would be register moves, which take the SDOTs' NEON pipes.
    const int32_t* s = start + c0;
    __asm__("" : "+r"(s));
#pragma GCC unroll 4
    for (size_t j = 0; j < 4; ++j) acc[r][j] = vld1q_s32(s + 4 * j);
  }
  const int8_t* p = panel;
  size_t qd = 0;
  for (size_t k = 0; qd < quads; k += 16) {
    int8x16_t av[kRows];
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) av[r] = vld1q_s8(a + r * ka + k);
    EDGEINF_DOT_QUAD(0);
    if (++qd == quads) break;
    EDGEINF_DOT_QUAD(1);
    if (++qd == quads) break;
    EDGEINF_DOT_QUAD(2);
    if (++qd == quads) break;
    EDGEINF_DOT_QUAD(3);
    ++qd;
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {  // unrolled: indexed by a variable, acc would live in memory
    // The parameters loaded per row: each row's FMLA overwrites its offsets, and after the
    // previous row's int8 store the compiler reloads them instead of copying registers.
    if (r < rows) neon::store_prefix(out + r * out_stride, neon_rq::Requantize16Of<F>(q, c0)(acc[r]), ncols);
  }
}

template <neon_rq::Form F>
void run(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out, const Output& q) {
  const size_t n = g.out_c, quads = w.kp4() / 4, ka = (w.kp4() + 15) / 16 * 16, blocks = (n + 15) / 16;
  const int32_t* start = w.gemm().bias_minus_zero_point_terms();
  for_each_window_tile(g, in, static_cast<int8_t>(w.input_zero_point()), ka, kRows,
                       [&](const int8_t* a, size_t rows, size_t pixel) {
                         for (size_t b = 0; b < blocks; ++b) {
                           tile<F>(a, ka, quads, w.neondot_panel() + b * quads * 64, start, q, b * 16, rows,
                                   std::min<size_t>(16, n - b * 16), out + pixel * n + b * 16, n);
                         }
                       });
}

#undef EDGEINF_DOT_QUAD

}  // namespace

void qs8_conv2d_direct__neondot(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const Output q(w.gemm().requantization(), w.gemm().float_requantization());
  switch (neon_rq::form_of(q)) {
    case neon_rq::Form::kFloat:
      return run<neon_rq::Form::kFloat>(w, g, in, out, q);
    case neon_rq::Form::kFloatSplit:
      return run<neon_rq::Form::kFloatSplit>(w, g, in, out, q);
    default:
      return run<neon_rq::Form::kFixedPoint>(w, g, in, out, q);
  }
}

}  // namespace edgeinf::qs8
