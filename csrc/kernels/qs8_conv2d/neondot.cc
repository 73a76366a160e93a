// NEON direct conv2d for few input channels (conv2d.h) with the dot-product extension
// (Cortex-A76 and later): 4 output pixels x 16 output channels per tile (8 for a last
// block of up to 8 channels, e.g. the 24 of a face detector's stem), SDOT over quads of K
// values.
//
// Window rows hold raw int8 inputs (padded taps as the input zero point), K padded with
// zeros; SDOT sums four exact int8 products into each int32 lane. Accumulators start
// from bias - zero_point * sum(w), so a padded tap adds zp * w - zp * w = 0 like the
// reference's skipped tap; the total equals the reference accumulator modulo 2^32.
#include <arm_neon.h>

#include <algorithm>
#include <vector>

#include "../../quant/rq_neon_inl.h"
#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

using neon_rq::Form;
using neon_rq::Output;

constexpr size_t kRows = 4;

// The fixed-point steps when every channel shifts right (shift < 0, so no left shift),
// with the zero point in int16 lanes (neon::mbqm_right8), then clamped as int8.
struct RightShiftRq {
  const int32_t* multiplier;
  const int32_t* neg_right_shift;
  int16x8_t zero_point;
  int8x16_t lo, hi;
  int16x8_t scale8(int32x4_t a0, int32x4_t a1, size_t c) const {
    return neon::mbqm_right8(a0, a1, vld1q_s32(multiplier + c), vld1q_s32(multiplier + c + 4),
                             vld1q_s32(neg_right_shift + c), vld1q_s32(neg_right_shift + c + 4), zero_point);
  }
};

// The requantization of a tile row: V accumulator vectors (channels c .. c + 4V - 1) to
// 4V int8 lanes. F: the Output's form; Fast: RightShiftRq applies (F fixed point).
template <Form F, bool Fast, size_t V>
struct RowRq;

template <Form F, bool Fast>
struct RowRq<F, Fast, 4> {
  using Out = int8x16_t;
  static int8x16_t run(const int32x4_t (&a)[4], const Output& q, const RightShiftRq& r, size_t c) {
    if (Fast) {
      const int8x16_t v = vqmovn_high_s16(vqmovn_s16(r.scale8(a[0], a[1], c)), r.scale8(a[2], a[3], c + 8));
      return q.clamps ? vminq_s8(vmaxq_s8(v, r.lo), r.hi) : v;
    }
    return neon_rq::Requantize16Of<F>(q, c)(a);
  }
};

template <Form F, bool Fast>
struct RowRq<F, Fast, 2> {
  using Out = int8x8_t;
  static int8x8_t run(const int32x4_t (&a)[2], const Output& q, const RightShiftRq& r, size_t c) {
    if (Fast) {
      const int8x8_t v = vqmovn_s16(r.scale8(a[0], a[1], c));
      return q.clamps ? vmin_s8(vmax_s8(v, vget_low_s8(r.lo)), vget_low_s8(r.hi)) : v;
    }
    if (F == Form::kFixedPoint) return neon_rq::requantize8(a[0], a[1], q, c);
    // The float form as Requantize16Of's: zero point in the offsets, narrowed with saturation.
    int32x4_t v[2];
    for (int i = 0; i < 2; ++i) {
      const size_t ci = c + 4 * i;
      const float32x4_t s = vld1q_f32(q.scale + ci), o = vld1q_f32(q.offset + ci);
      v[i] = F == Form::kFloatSplit ? neon_rq::float_form_split(a[i], s, o, vld1q_f32(q.offset_neg + ci))
                                    : neon_rq::float_form(a[i], s, o);
    }
    const int8x8_t n = vqmovn_s16(vqmovn_high_s32(vqmovn_s32(v[0]), v[1]));
    return q.clamps ? vmin_s8(vmax_s8(n, vget_low_s8(q.lo8)), vget_low_s8(q.hi8)) : n;
  }
};

// Quad `L` (0-3) of the 16 K values in av against V x 4 channels of the panel at p (each
// quad of a 16-channel block takes 64 bytes; an 8-column tile reads its first half).
#define EDGEINF_DOT_QUAD(L)                                                             \
  do {                                                                                  \
    int8x16_t b[V];                                                                     \
    _Pragma("GCC unroll 4") for (size_t j = 0; j < V; ++j) b[j] = vld1q_s8(p + 16 * j); \
    p += 64;                                                                            \
    _Pragma("GCC unroll 4") for (size_t r = 0; r < kRows; ++r) {                        \
      _Pragma("GCC unroll 4") for (size_t j = 0; j < V; ++j) {                          \
        acc[r][j] = vdotq_laneq_s32(acc[r][j], b[j], av[r], L);                         \
      }                                                                                 \
    }                                                                                   \
  } while (0)

// a: kRows rows of ka int8 (ka a multiple of 16, zero past K); quads: K / 4 rounded up.
// V: accumulator vectors per row (4: 16 columns, 2: 8). Inlined into the loop over
// blocks: as a call, its prologue and spills cost as much as the requantization.
template <Form F, bool Fast, size_t V>
__attribute__((always_inline)) inline void tile(const int8_t* a, size_t ka, size_t quads, const int8_t* panel,
                                                const int32_t* start, const Output& q, const RightShiftRq& rr,
                                                size_t c0, size_t rows, size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[kRows][V];
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
    // Each row's start values loaded anew (the volatile empty asm hides that the address
    // repeats): copies of one load would be register moves, which take the SDOTs' NEON pipes.
    const int32_t* s = start + c0;
    __asm__ volatile("" : "+r"(s));
#pragma GCC unroll 4
    for (size_t j = 0; j < V; ++j) acc[r][j] = vld1q_s32(s + 4 * j);
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
    if (r < rows) neon::store_prefix(out + r * out_stride, RowRq<F, Fast, V>::run(acc[r], q, rr, c0), ncols);
  }
}

template <Form F, bool Fast>
void run(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out, const Output& q,
         const RightShiftRq& rr) {
  const size_t n = g.out_c, quads = w.kp4() / 4, ka = (w.kp4() + 15) / 16 * 16, full = n / 16, tail = n % 16;
  const int32_t* start = w.gemm().bias_minus_zero_point_terms();
  const int8_t* panels = w.neondot_panel();
  for_each_window_tile(
      g, in, static_cast<int8_t>(w.input_zero_point()), ka, kRows, [&](const int8_t* a, size_t rows, size_t pixel) {
        int8_t* o = out + pixel * n;
        for (size_t b = 0; b < full; ++b) {
          tile<F, Fast, 4>(a, ka, quads, panels + b * quads * 64, start, q, rr, b * 16, rows, 16, o + b * 16, n);
        }
        if (tail == 0) return;
        const size_t c0 = full * 16;
        if (tail <= 8) {
          tile<F, Fast, 2>(a, ka, quads, panels + full * quads * 64, start, q, rr, c0, rows, tail, o + c0, n);
        } else {
          tile<F, Fast, 4>(a, ka, quads, panels + full * quads * 64, start, q, rr, c0, rows, tail, o + c0, n);
        }
      });
}

#undef EDGEINF_DOT_QUAD

}  // namespace

void qs8_conv2d_direct__neondot(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const Requantization& rq = w.gemm().requantization();
  const Output q(rq, w.gemm().float_requantization());
  RightShiftRq rr{rq.multiplier.data(), nullptr, vdupq_n_s16(static_cast<int16_t>(rq.output_zero_point)), q.lo8, q.hi8};
  const size_t n = g.out_c;
  switch (neon_rq::fastest_form(q, n)) {
    case Form::kFloat:
      return run<Form::kFloat, false>(w, g, in, out, q, rr);
    case Form::kFloatSplit:
      return run<Form::kFloatSplit, false>(w, g, in, out, q, rr);
    case Form::kFixedPoint:
      return run<Form::kFixedPoint, false>(w, g, in, out, q, rr);
    default:
      break;
  }
  // the tiles read whole blocks of 16 channels (rq is padded to them)
  const std::vector<int32_t> neg_right = neon_rq::negated_right_shifts(rq, rq.channels());
  rr.neg_right_shift = neg_right.data();
  run<Form::kFixedPoint, true>(w, g, in, out, q, rr);
}

}  // namespace edgeinf::qs8
