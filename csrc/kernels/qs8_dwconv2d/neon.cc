// NEON depthwise conv2d: per output row, blocks of 16 (or 8) channels, raw int8 inputs
// times int8 weights, in halves of 8 channels.
//
// VMULL gives exact int16 products (at most 128 * 128). When no weight is -128, a second
// tap is added in int16 by VMLAL (|sum| <= 2 * 128 * 127 < 2^15), halving the widening
// adds (VADDW) into the int32 accumulators; otherwise every tap is widened on its own.
// Multiplies take 64-bit halves (8 channels), which the Cortex-A53's 64-bit datapath runs
// in one pass. The zero point enters as bias - zp * sum(w), so a padded tap, which reads
// the zero point, adds zp * w - zp * w = 0 like the reference's skipped tap, and the total
// equals the reference accumulator modulo 2^32 (in any order of the taps: an odd tap count
// takes the first tap alone). A depth multiplier above 1 reads rows with repeated channels
// (DwRows), so it runs the same code.
//
// A block of channels walks one output row: pixels whose window lies within the row go in
// pairs that share each weight load (a 3x3 filter at stride 1 or 2 also shares the input
// columns the two windows have in common), the others read the zero row for taps off the
// row. When 8 does not divide the channel count, the last block overlaps the one before it
// (the overlapping channels are computed twice, to equal values), so every channel runs in
// SIMD from 8 channels up.
#include <arm_neon.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "../../quant/rq_neon_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {
// (named so that per-function profiles, tools/arm64/bounds.py, file these under depthwise)
namespace dwconv_neon {
namespace {

using neon_rq::Form;
using neon_rq::Output;

constexpr size_t kTapBytes = 16;  // a block panel's weights of one tap (8 used by an 8-channel block)

// Inlined into the loops whatever their size: their accumulators live in registers.
#define EDGEINF_DW_INLINE __attribute__((always_inline)) inline

// The requantization of a block of 8H channels from c: as Requantize16Of (rq_neon_inl.h),
// saturating narrows and then the activation clamp on int8 lanes. The float form's and
// kFixedRight's parameters are loaded at each use rather than held in registers: FMLA
// overwrites its offset operand, and a load costs less than a register copy.
template <int H, Form F>
struct BlockRq {
  const Output& q;
  size_t c;
  // at channel c (copies: an int8 store could alias q's)
  const float *scale, *offset, *offset_neg;
  const int32_t *multiplier, *neg_right_shift;  // kFixedRight's
  int8x16_t lo, hi;
  int16x8_t zero_point16;
  BlockRq(const Output& out, size_t channel)
      : q(out),
        c(channel),
        scale(out.scale ? out.scale + channel : nullptr),
        offset(out.offset ? out.offset + channel : nullptr),
        offset_neg(out.offset_neg ? out.offset_neg + channel : nullptr),
        multiplier(out.rq.multiplier.data() + channel),
        neg_right_shift(out.neg_right_shift ? out.neg_right_shift + channel : nullptr),
        lo(out.lo8),
        hi(out.hi8),
        zero_point16(vdupq_n_s16(static_cast<int16_t>(out.rq.output_zero_point))) {}
  // kFixedRight's channels 8h .. 8h + 7 of the block, with the zero point, in int16 lanes
  EDGEINF_DW_INLINE int16x8_t fixed_right8(int32x4_t a0, int32x4_t a1, int h) const {
    return neon::mbqm_right8(a0, a1, vld1q_s32(multiplier + 8 * h), vld1q_s32(multiplier + 8 * h + 4),
                             vld1q_s32(neg_right_shift + 8 * h), vld1q_s32(neg_right_shift + 8 * h + 4), zero_point16);
  }
  // the float form of channels 4i .. 4i + 3 of the block
  EDGEINF_DW_INLINE int32x4_t scaled(int32x4_t a, float32x4_t s, int i) const {
    const float32x4_t o = vld1q_f32(offset + 4 * i);
    if constexpr (F == Form::kFloatSplit) return neon_rq::float_form_split(a, s, o, vld1q_f32(offset_neg + 4 * i));
    return neon_rq::float_form(a, s, o);
  }
  EDGEINF_DW_INLINE void store(const int32x4_t (&a)[2 * H], int8_t* o) const {
    if constexpr (F == Form::kFixedPoint) {
      for (int h = 0; h < H; ++h) vst1_s8(o + 8 * h, neon_rq::requantize8(a[2 * h], a[2 * h + 1], q, c + 8 * h));
    } else if constexpr (F == Form::kFixedRight && H == 2) {
      const int8x16_t b = vqmovn_high_s16(vqmovn_s16(fixed_right8(a[0], a[1], 0)), fixed_right8(a[2], a[3], 1));
      vst1q_s8(o, vminq_s8(vmaxq_s8(b, lo), hi));
    } else if constexpr (F == Form::kFixedRight) {
      vst1_s8(o, vmin_s8(vmax_s8(vqmovn_s16(fixed_right8(a[0], a[1], 0)), vget_low_s8(lo)), vget_low_s8(hi)));
    } else if constexpr (H == 2) {
      const float32x4x4_t s = vld1q_f32_x4(scale);
      const int16x8_t h0 = vqmovn_high_s32(vqmovn_s32(scaled(a[0], s.val[0], 0)), scaled(a[1], s.val[1], 1));
      const int16x8_t h1 = vqmovn_high_s32(vqmovn_s32(scaled(a[2], s.val[2], 2)), scaled(a[3], s.val[3], 3));
      vst1q_s8(o, vminq_s8(vmaxq_s8(vqmovn_high_s16(vqmovn_s16(h0), h1), lo), hi));
    } else {
      const float32x4x2_t s = vld1q_f32_x2(scale);
      const int16x8_t h0 = vqmovn_high_s32(vqmovn_s32(scaled(a[0], s.val[0], 0)), scaled(a[1], s.val[1], 1));
      vst1_s8(o, vmin_s8(vmax_s8(vqmovn_s16(h0), vget_low_s8(lo)), vget_low_s8(hi)));
    }
  }
};

// 8H int8 values at p, as halves of 8.
template <int H>
EDGEINF_DW_INLINE int8x8x2_t load_halves(const int8_t* p) {
  int8x8x2_t v;
  v.val[0] = vld1_s8(p);
  v.val[1] = H == 2 ? vld1_s8(p + 8) : v.val[0];
  return v;
}

// acc (or, kFirst, start) plus the int16 products p of 8 channels, widened.
template <bool kFirst>
EDGEINF_DW_INLINE void widen_add(int32x4_t& lo, int32x4_t& hi, int32x4_t start_lo, int32x4_t start_hi, int16x8_t p) {
  lo = vaddw_s16(kFirst ? start_lo : lo, vget_low_s16(p));
  hi = vaddw_high_s16(kFirst ? start_hi : hi, p);
}

// The accumulators of P pixels for a block of 8H channels: pixel j reads tap t at
// src[t] + j * step, wt holds the block's weights (kTapBytes per tap), start the block's
// start values (loaded here: a load costs less than holding them in registers). The tap
// count as compiled (kTaps) or, where that is 0, as given.
template <bool kPairs, size_t kTaps, int P, int H>
EDGEINF_DW_INLINE void accumulate(const int8_t* wt, const int8_t* const* src, size_t step, size_t given_taps,
                                  const int32_t* start_values, int32x4_t (&acc)[P][2 * H]) {
  const size_t taps = kTaps ? kTaps : given_taps;
  int32x4_t start[2 * H];
  for (int i = 0; i < 2 * H; ++i) start[i] = vld1q_s32(start_values + 4 * i);
  // taps alone: all of them, or the first of an odd count, so that the rest pair up
  const size_t single = kPairs ? taps % 2 : taps;
  size_t t = 0;
  if (single == 0) {  // the first pair starts the accumulators
    const int8x8x2_t f0 = load_halves<H>(wt), f1 = load_halves<H>(wt + kTapBytes);
    for (int j = 0; j < P; ++j) {
      const int8x8x2_t x0 = load_halves<H>(src[0] + j * step), x1 = load_halves<H>(src[1] + j * step);
      for (int h = 0; h < H; ++h) {
        const int16x8_t p = vmlal_s8(vmull_s8(x0.val[h], f0.val[h]), x1.val[h], f1.val[h]);
        widen_add<true>(acc[j][2 * h], acc[j][2 * h + 1], start[2 * h], start[2 * h + 1], p);
      }
    }
    t = 2;
  } else {  // the first tap alone starts them
    const int8x8x2_t f = load_halves<H>(wt);
    for (int j = 0; j < P; ++j) {
      const int8x8x2_t x = load_halves<H>(src[0] + j * step);
      for (int h = 0; h < H; ++h)
        widen_add<true>(acc[j][2 * h], acc[j][2 * h + 1], start[2 * h], start[2 * h + 1], vmull_s8(x.val[h], f.val[h]));
    }
    t = 1;
  }
  for (; t < single; ++t) {
    const int8x8x2_t f = load_halves<H>(wt + t * kTapBytes);
    for (int j = 0; j < P; ++j) {
      const int8x8x2_t x = load_halves<H>(src[t] + j * step);
      for (int h = 0; h < H; ++h)
        widen_add<false>(acc[j][2 * h], acc[j][2 * h + 1], start[0], start[0], vmull_s8(x.val[h], f.val[h]));
    }
  }
  for (; t < taps; t += 2) {
    const int8x8x2_t f0 = load_halves<H>(wt + t * kTapBytes), f1 = load_halves<H>(wt + (t + 1) * kTapBytes);
    for (int j = 0; j < P; ++j) {
      const int8x8x2_t x0 = load_halves<H>(src[t] + j * step), x1 = load_halves<H>(src[t + 1] + j * step);
      for (int h = 0; h < H; ++h) {
        const int16x8_t p = vmlal_s8(vmull_s8(x0.val[h], f0.val[h]), x1.val[h], f1.val[h]);
        widen_add<false>(acc[j][2 * h], acc[j][2 * h + 1], start[0], start[0], p);
      }
    }
  }
}

// A 3x3 filter, P adjacent pixels (P = 1 or 2) at horizontal stride S, pairs of taps in
// int16. x(t, j) is where pixel j reads tap t (ky * 3 + kx): within the row, pixel 1's tap
// in column kx is pixel 0's column kx + S, so a pair loads 3 + S input columns of each
// filter row where tap by tap it would load six. At stride 2 (kPairLoads) a block of 16
// channels loads each input column and each tap's weights as two 8-byte halves in one LD1:
// fewer load instructions for the A72's three issue slots, the multiplies still on 64-bit
// halves (one pass each of the A53's 64-bit datapath, where a high-half VMULL2 takes two).
// At stride 1 the register pairs LD1 needs cost more copies than the loads they save.
template <int P, int H, bool kPairLoads = false, class Input>
EDGEINF_DW_INLINE void accumulate3x3(const int8_t* wt, Input x, const int32_t* start_values,
                                     int32x4_t (&acc)[P][2 * H]) {
  if constexpr (H == 2 && kPairLoads) {
    auto in = [&](int t, int j) { return vld1_s8_x2(x(t, j)); };
    auto f = [&](int t) { return vld1_s8_x2(wt + t * kTapBytes); };
    int32x4_t s[4];
    for (int i = 0; i < 4; ++i) s[i] = vld1q_s32(start_values + 4 * i);
    const int8x8x2_t f0 = f(0);
    for (int j = 0; j < P; ++j) {
      const int8x8x2_t v = in(0, j);
      for (int h = 0; h < 2; ++h)
        widen_add<true>(acc[j][2 * h], acc[j][2 * h + 1], s[2 * h], s[2 * h + 1], vmull_s8(v.val[h], f0.val[h]));
    }
    for (int t = 1; t < 9; t += 2) {
      const int8x8x2_t fa = f(t), fb = f(t + 1);
      for (int j = 0; j < P; ++j) {
        const int8x8x2_t va = in(t, j), vb = in(t + 1, j);
        for (int h = 0; h < 2; ++h) {
          const int16x8_t p = vmlal_s8(vmull_s8(va.val[h], fa.val[h]), vb.val[h], fb.val[h]);
          widen_add<false>(acc[j][2 * h], acc[j][2 * h + 1], s[2 * h], s[2 * h + 1], p);
        }
      }
    }
    return;
  }
  auto in = [&](int t, int j, int h) { return vld1_s8(x(t, j) + 8 * h); };
  auto f = [&](int t, int h) { return vld1_s8(wt + t * kTapBytes + 8 * h); };
  for (int h = 0; h < H; ++h) {
    const int32x4_t s_lo = vld1q_s32(start_values + 8 * h), s_hi = vld1q_s32(start_values + 8 * h + 4);
    const int8x8_t f0 = f(0, h);
    for (int j = 0; j < P; ++j)
      widen_add<true>(acc[j][2 * h], acc[j][2 * h + 1], s_lo, s_hi, vmull_s8(in(0, j, h), f0));
    for (int t = 1; t < 9; t += 2) {
      const int8x8_t fa = f(t, h), fb = f(t + 1, h);
      for (int j = 0; j < P; ++j) {
        const int16x8_t p = vmlal_s8(vmull_s8(in(t, j, h), fa), in(t + 1, j, h), fb);
        widen_add<false>(acc[j][2 * h], acc[j][2 * h + 1], s_lo, s_hi, p);
      }
    }
  }
}

// What one block of one output row needs.
struct RowBlock {
  const DwGeometry& g;
  size_t oc, c0;
  const int8_t* panel;        // the block's weights, kTapBytes per tap
  const int8_t* const* rows;  // the window's input rows (DwRows)
  const int8_t* zero_row;
  int8_t* out;  // the output row
};

// Tap pointers (at channel c0) of output pixel ox, the zero row for taps outside the row.
inline void tap_pointers(const RowBlock& r, size_t ox, const int8_t** src) {
  const DwGeometry& g = r.g;
  const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left, in_w = static_cast<ptrdiff_t>(g.in_w);
  for (size_t ky = 0, t = 0; ky < g.k_h; ++ky) {
    for (size_t kx = 0; kx < g.k_w; ++kx, ++t) {
      const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
      src[t] = (ix >= 0 && ix < in_w ? r.rows[ky] + ix * static_cast<ptrdiff_t>(r.oc) : r.zero_row) + r.c0;
    }
  }
}

// One block of one output row of a 3x3 filter at horizontal stride S, dilation 1, no
// weight of -128: pixels in pairs, a window over the row's edge with the zero row.
template <int S, int H, Form F>
void row_3x3(const RowBlock& r, const int32_t* start_values, const Output& q) {
  const DwGeometry& g = r.g;
  // copies of what the loops read: an int8 store could alias r's members
  const size_t oc = r.oc, c0 = r.c0, out_w = g.out_w;
  const int8_t* const panel = r.panel;
  const int8_t* const zero = r.zero_row + c0;
  const int8_t* const rows[3] = {r.rows[0] + c0, r.rows[1] + c0, r.rows[2] + c0};
  const BlockRq<H, F> rq(q, c0);
  const int32_t* start = start_values + c0;
  int8_t* const o = r.out + c0;
  const ptrdiff_t in_w = static_cast<ptrdiff_t>(g.in_w), pad = g.pad_left;
  auto edge = [&](size_t ox) {
    const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox) * S - pad;
    const int8_t* src[9];
    for (int t = 0; t < 9; ++t) {
      const ptrdiff_t ix = ix0 + t % 3;
      src[t] = ix >= 0 && ix < in_w ? rows[t / 3] + ix * static_cast<ptrdiff_t>(oc) : zero;
    }
    int32x4_t acc[1][2 * H];
    accumulate3x3<1, H, S == 2>(
        panel, [&](int t, int) { return src[t]; }, start, acc);
    rq.store(acc[0], o + ox * oc);
  };
  // pixels [lo, hi) have their whole window within the row
  size_t lo = 0, hi = out_w;
  while (lo < hi && static_cast<ptrdiff_t>(lo) * S - pad < 0) ++lo;
  while (hi > lo && static_cast<ptrdiff_t>(hi - 1) * S - pad + 2 >= in_w) --hi;
  for (size_t ox = 0; ox < lo; ++ox) edge(ox);
  size_t ox = lo;
  if (ox < hi) {
    const ptrdiff_t at = (static_cast<ptrdiff_t>(ox) * S - pad) * static_cast<ptrdiff_t>(oc);
    const int8_t* p[3] = {rows[0] + at, rows[1] + at, rows[2] + at};
    auto x = [&](int t, int j) { return p[t / 3] + (t % 3 + j * S) * oc; };
    for (; ox + 2 <= hi; ox += 2) {
      int32x4_t acc[2][2 * H];
      accumulate3x3<2, H, S == 2>(panel, x, start, acc);
      rq.store(acc[0], o + ox * oc);
      rq.store(acc[1], o + (ox + 1) * oc);
      for (auto& row : p) row += 2 * S * oc;
    }
    if (ox < hi) {
      int32x4_t acc[1][2 * H];
      accumulate3x3<1, H, S == 2>(panel, x, start, acc);
      rq.store(acc[0], o + ox * oc);
      ++ox;
    }
  }
  for (; ox < out_w; ++ox) edge(ox);
}

template <bool kPairs, size_t kTaps, int H, Form F>
void row_block(const RowBlock& r, const int32_t* start_values, const Output& q) {
  const DwGeometry& g = r.g;
  // copies of what the loops read: an int8 store could alias r's members
  const size_t oc = r.oc, taps = kTaps ? kTaps : g.k_h * g.k_w, step = g.stride_w * oc, out_w = g.out_w;
  const int8_t* const panel = r.panel;
  const BlockRq<H, F> rq(q, r.c0);
  const int32_t* start = start_values + r.c0;
  constexpr size_t kArray = kTaps ? kTaps : 1;
  std::vector<const int8_t*> given(kTaps ? 0 : taps);
  int8_t* const o = r.out + r.c0;
  auto one = [&](size_t ox) {
    const int8_t* fixed[kArray];
    const int8_t** src = kTaps ? fixed : given.data();
    int32x4_t acc[1][2 * H];
    tap_pointers(r, ox, src);
    accumulate<kPairs, kTaps, 1, H>(panel, src, step, taps, start, acc);
    rq.store(acc[0], o + ox * oc);
  };
  // pixels [lo, hi) have their whole window within the row
  const ptrdiff_t reach = static_cast<ptrdiff_t>((g.k_w - 1) * g.dilation_w);
  const ptrdiff_t stride = static_cast<ptrdiff_t>(g.stride_w), in_w = static_cast<ptrdiff_t>(g.in_w);
  size_t lo = 0, hi = out_w;
  while (lo < hi && static_cast<ptrdiff_t>(lo) * stride - g.pad_left < 0) ++lo;
  while (hi > lo && static_cast<ptrdiff_t>(hi - 1) * stride - g.pad_left + reach >= in_w) --hi;
  for (size_t ox = 0; ox < lo; ++ox) one(ox);
  size_t ox = lo;
  if (ox + 2 <= hi) {
    // the pairs' tap pointers: a local copy, whose address no call sees, stays in registers
    const int8_t* first[kArray];
    const int8_t** at = kTaps ? first : given.data();
    tap_pointers(r, ox, at);
    const int8_t* cur[kArray];
    const int8_t** src = kTaps ? cur : given.data();
    if (kTaps) {
      for (size_t t = 0; t < kArray; ++t) cur[t] = first[t] + (ox - lo) * step;
    }
    for (; ox + 2 <= hi; ox += 2) {
      int32x4_t acc[2][2 * H];
      accumulate<kPairs, kTaps, 2, H>(panel, src, step, taps, start, acc);
      rq.store(acc[0], o + ox * oc);
      rq.store(acc[1], o + (ox + 1) * oc);
      for (size_t t = 0; t < taps; ++t) src[t] += 2 * step;
    }
  }
  for (; ox < out_w; ++ox) one(ox);
}

// A block of channels: its first channel, width (8H) and weights.
struct Block {
  size_t c0;
  int h;
  const int8_t* panel;
};

// Channels [from, oc), from a multiple of 16.
template <bool kPairs, size_t kTaps, Form F>
void run_form(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out, const Output& q, size_t from) {
  const size_t oc = g.in_c * g.depth_multiplier, taps = g.k_h * g.k_w;
  // The blocks: 16 channels from the panels of DwWeights, then the rest as one block of 16
  // or 8 ending at the last channel, its weights gathered here when it is not a panel's.
  std::vector<Block> blocks;
  std::vector<int8_t> tail(taps * kTapBytes, 0);
  size_t c0 = from;
  for (; c0 + 16 <= oc; c0 += 16) blocks.push_back({c0, 2, w.neon_panel() + c0 * taps});
  if (c0 < oc && oc - c0 > 8 && oc < 16) {  // 9 to 15 channels: 8, then 8 ending at the last
    blocks.push_back({0, 1, w.neon_panel()});
    c0 = 8;
  }
  if (c0 < oc) {
    const size_t n = oc - c0 > 8 ? 16 : 8, first = oc - n;
    if (first % 16 == 0) {
      blocks.push_back({first, n == 16 ? 2 : 1, w.neon_panel() + first * taps});
    } else {
      for (size_t t = 0; t < taps; ++t) {
        for (size_t i = 0; i < n; ++i) tail[t * kTapBytes + i] = w.weights()[t * oc + first + i];
      }
      blocks.push_back({first, n == 16 ? 2 : 1, tail.data()});
    }
  }
  // 3x3 at a horizontal stride of 1 or 2 with pairs of taps: its own loops
  const bool three_by_three = kPairs && kTaps == 9 && g.k_w == 3 && g.dilation_w == 1 && g.stride_w <= 2;
  DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
  std::vector<const int8_t*> rp(g.k_h);
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp.data());
      int8_t* o = out + (b * g.out_h + oy) * g.out_w * oc;
      for (const Block& blk : blocks) {
        const RowBlock r{g, oc, blk.c0, blk.panel, rp.data(), rows.zero_row(), o};
        const int32_t* start = w.bias_minus_zero_point_terms();
        if (three_by_three && g.stride_w == 1) {
          blk.h == 2 ? row_3x3<1, 2, F>(r, start, q) : row_3x3<1, 1, F>(r, start, q);
        } else if (three_by_three) {
          blk.h == 2 ? row_3x3<2, 2, F>(r, start, q) : row_3x3<2, 1, F>(r, start, q);
        } else if (blk.h == 2) {
          row_block<kPairs, kTaps, 2, F>(r, start, q);
        } else {
          row_block<kPairs, kTaps, 1, F>(r, start, q);
        }
      }
    }
  }
}

template <bool kPairs, size_t kTaps>
void run(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out, size_t from = 0) {
  Output q(w.requantization(), w.neon_float_requantization());
  const size_t oc = g.in_c * g.depth_multiplier;
  switch (neon_rq::fastest_form(q, oc)) {
    case Form::kFloat:
      return run_form<kPairs, kTaps, Form::kFloat>(w, g, in, out, q, from);
    case Form::kFloatSplit:
      return run_form<kPairs, kTaps, Form::kFloatSplit>(w, g, in, out, q, from);
    case Form::kFixedRight: {
      const std::vector<int32_t> neg_right = neon_rq::negated_right_shifts(w.requantization(), oc);
      q.neg_right_shift = neg_right.data();
      return run_form<kPairs, kTaps, Form::kFixedRight>(w, g, in, out, q, from);
    }
    default:
      return run_form<kPairs, kTaps, Form::kFixedPoint>(w, g, in, out, q, from);
  }
}

}  // namespace
}  // namespace dwconv_neon

bool qs8_dwconv2d__neon_runs_3x3(const DwWeights& w, const DwGeometry& g) {
  return w.weights_above_min() && g.k_h == 3 && g.k_w == 3 && g.dilation_w == 1 && g.stride_w <= 2;
}

void qs8_dwconv2d__neon_from(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out, size_t from) {
  if (g.batch == 0 || g.out_h == 0 || g.out_w == 0 || from >= g.in_c * g.depth_multiplier) return;
  if (qs8_dwconv2d__neon_runs_3x3(w, g)) return dwconv_neon::run<true, 9>(w, g, in, out, from);
  if (w.weights_above_min()) return dwconv_neon::run<true, 0>(w, g, in, out, from);
  dwconv_neon::run<false, 0>(w, g, in, out, from);
}

void qs8_dwconv2d__neon(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using namespace dwconv_neon;
  if (g.batch == 0 || g.out_h == 0 || g.out_w == 0) return;
  const size_t oc = g.in_c * g.depth_multiplier;
  if (oc < 8) {  // narrower than one block: the reference
    for (size_t b = 0; b < g.batch; ++b) {
      for (size_t oy = 0; oy < g.out_h; ++oy) {
        for (size_t ox = 0; ox < g.out_w; ++ox)
          dwconv_pixel_channels(w, g, in, b, oy, ox, 0, oc, out + ((b * g.out_h + oy) * g.out_w + ox) * oc);
      }
    }
    return;
  }
  // 3x3 and 5x5 filters (the face models') unrolled, any other as given
  const size_t taps = g.k_h * g.k_w;
  if (w.weights_above_min()) {
    if (taps == 9) return run<true, 9>(w, g, in, out);
    if (taps == 25) return run<true, 25>(w, g, in, out);
    return run<true, 0>(w, g, in, out);
  }
  run<false, 0>(w, g, in, out);
}

}  // namespace edgeinf::qs8
