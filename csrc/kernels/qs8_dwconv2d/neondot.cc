// NEON depthwise conv2d with the dot-product extension (Cortex-A76 and later), for 16
// channels or more at a horizontal stride of 1 or 2 (others run the plain NEON kernel).
//
// SDOT sums four int8 products into each int32 lane, and a depthwise lane is one channel:
// its four bytes must be four filter taps of that channel. They are the taps of one filter
// column in a group of four filter rows (DwWeights::neondot_panel), so each input column
// of an output row is interleaved once (two rounds of ZIP over the group's rows) into a
// scratch row, which every output pixel whose window covers that column then reads: a
// 3x3 filter at stride 1 reads each interleaved column three times, where multiplying
// int8 vectors (neon.cc) widens every product on its own; a 3x3 filter's columns stay in
// registers instead (row_in_registers). Rows past k_h in a group have
// zero weights, so the row they read does not matter.
//
// Raw int8 inputs, padded taps reading the input zero point, against a start value of
// bias - zp * sum(w): the total equals the reference accumulator modulo 2^32 (neon.cc).
// When 16 does not divide the channel count, the last block overlaps the one before it.
#include <arm_neon.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "../../quant/rq_neon_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {
// (named so that per-function profiles, tools/arm64/bounds.py, file these under depthwise)
namespace dwconv_neondot {
namespace {

using neon_rq::Output;

// the per-pixel steps of a row inlined: called from several places of one loop, they
// would otherwise be calls that pass the accumulators and columns through memory
#define EDGEINF_DWD_INLINE __attribute__((always_inline))

constexpr size_t kGroupBytes = 64;  // 16 channels x 4 rows

// 16 channels of four rows at one column: lane i of output vector j is channel 4j + i's
// four rows, in order.
inline void interleave(const int8_t* r0, const int8_t* r1, const int8_t* r2, const int8_t* r3, int8_t* dst) {
  const int8x16_t a = vld1q_s8(r0), b = vld1q_s8(r1), c = vld1q_s8(r2), d = vld1q_s8(r3);
  const int16x8_t ab0 = vreinterpretq_s16_s8(vzip1q_s8(a, b)), ab1 = vreinterpretq_s16_s8(vzip2q_s8(a, b));
  const int16x8_t cd0 = vreinterpretq_s16_s8(vzip1q_s8(c, d)), cd1 = vreinterpretq_s16_s8(vzip2q_s8(c, d));
  vst1q_s8(dst, vreinterpretq_s8_s16(vzip1q_s16(ab0, cd0)));
  vst1q_s8(dst + 16, vreinterpretq_s8_s16(vzip2q_s16(ab0, cd0)));
  vst1q_s8(dst + 32, vreinterpretq_s8_s16(vzip1q_s16(ab1, cd1)));
  vst1q_s8(dst + 48, vreinterpretq_s8_s16(vzip2q_s16(ab1, cd1)));
}

// Where the output pixels of one row read their interleaved columns: the window of pixel
// ox starts at column ox * pixel_step, its filter column kx kx * tap_step further (bytes).
// k_w and groups (of four filter rows) as compiled (KW, G) or, where those are 0, as given.
template <int KW, int G>
struct Window {
  size_t k_w, groups, pixel_step, tap_step;
  size_t columns() const { return KW ? KW : k_w; }
  size_t row_groups() const { return G ? G : groups; }
};

// P adjacent output pixels (sharing each weight load) of the 16 channels from c0: cols is
// the first pixel's window, w its block's panel, start its accumulators' start values (loaded
// into each accumulator: a copy of values held in registers would take a NEON pipe).
template <int P, int KW, int G, neon_rq::Form F>
inline void pixels(const Window<KW, G>& win, const int8_t* cols, const int8_t* w, const int32_t* start,
                   const neon_rq::Requantize16Of<F>& rq, int8_t* o, size_t o_step) {
  int32x4_t acc[P][4];
  for (int j = 0; j < 4; ++j) {
    for (int p = 0; p < P; ++p) acc[p][j] = vld1q_s32(start + 4 * j);
  }
  for (size_t kx = 0; kx < win.columns(); ++kx) {
    for (size_t g = 0; g < win.row_groups(); ++g, w += kGroupBytes) {
      const int8_t* x = cols + kx * win.tap_step + g * kGroupBytes;
      for (int j = 0; j < 4; ++j) {
        const int8x16_t f = vld1q_s8(w + 16 * j);
        for (int p = 0; p < P; ++p) acc[p][j] = vdotq_s32(acc[p][j], vld1q_s8(x + p * win.pixel_step + 16 * j), f);
      }
    }
  }
  for (int p = 0; p < P; ++p) vst1q_s8(o + p * o_step, rq(acc[p]));
}

// The four interleaved vectors of one column (interleave's layout, in registers). R3: the
// fourth row is read; without it (three rows, the fourth's taps zero) the third row stands in
// for it, a load spared.
template <bool R3>
inline void interleave_to(const int8_t* r0, const int8_t* r1, const int8_t* r2, const int8_t* r3, int8x16_t (&d)[4]) {
  const int8x16_t a = vld1q_s8(r0), b = vld1q_s8(r1), c = vld1q_s8(r2), e = R3 ? vld1q_s8(r3) : c;
  const int16x8_t ab0 = vreinterpretq_s16_s8(vzip1q_s8(a, b)), ab1 = vreinterpretq_s16_s8(vzip2q_s8(a, b));
  const int16x8_t ce0 = vreinterpretq_s16_s8(vzip1q_s8(c, e)), ce1 = vreinterpretq_s16_s8(vzip2q_s8(c, e));
  d[0] = vreinterpretq_s8_s16(vzip1q_s16(ab0, ce0));
  d[1] = vreinterpretq_s8_s16(vzip2q_s16(ab0, ce0));
  d[2] = vreinterpretq_s8_s16(vzip1q_s16(ab1, ce1));
  d[3] = vreinterpretq_s8_s16(vzip2q_s16(ab1, ce1));
}

// One row of a 3x3 filter (one group of rows) at stride S (1 or 2) for the 16 channels
// from c0, its interleaved columns in registers: the window of pixel ox covers columns
// S * ox .. S * ox + 2, of which the pixel before read the first 3 - S, so the row walks
// with those kept and S columns interleaved per pixel; nothing goes through a scratch row,
// whose stores and reloads would outnumber the SDOTs. r: the group's four input rows;
// first, in_w, q as in run_form; R3 as in interleave_to; C: q.clamps fixed (0 or 1) so that the
// loop has one path, or -1: read at each pixel.
template <int S, bool R3, int C, neon_rq::Form F>
EDGEINF_DWD_INLINE inline void row_in_registers(const int8_t* const* r, ptrdiff_t first, ptrdiff_t in_w, size_t oc,
                                                size_t c0, size_t out_w, const int8_t* panel, const int32_t* start,
                                                const Output& q, int8x16_t padding, int8_t* o) {
  static_assert(S == 1 || S == 2, "a column of a 3x3 window is shared at strides 1 and 2");
  // at stride 2, the FMLAs by fma_loaded (a vector move spared a pixel)
  neon_rq::Requantize16Of<F, S == 2> rq(q, c0);
  if constexpr (C >= 0) rq.clamps = C == 1;
  // the rows in locals (an int8 store may alias the array, which would be read again)
  const int8_t *r0 = r[0] + c0, *r1 = r[1] + c0, *r2 = r[2] + c0, *r3 = r[3] + c0;
  // the column at byte offset `at` of the rows
  auto at_offset = [&](size_t at, int8x16_t(&d)[4])
                       EDGEINF_DWD_INLINE { interleave_to<R3>(r0 + at, r1 + at, r2 + at, r3 + at, d); };
  auto inside = [&](size_t x, int8x16_t(&d)[4])
                    EDGEINF_DWD_INLINE { at_offset(static_cast<size_t>(first + static_cast<ptrdiff_t>(x)) * oc, d); };
  auto column = [&](size_t x, int8x16_t(&d)[4]) EDGEINF_DWD_INLINE {
    const ptrdiff_t ix = first + static_cast<ptrdiff_t>(x);
    if (ix < 0 || ix >= in_w) {
      for (int j = 0; j < 4; ++j) d[j] = padding;  // zero points, interleaved
    } else {
      inside(x, d);
    }
  };
  // start + the three columns against the filter's three columns (64 bytes each)
  auto pixel = [&](const int8x16_t(&c0v)[4], const int8x16_t(&c1v)[4], const int8x16_t(&c2v)[4], size_t ox)
                   EDGEINF_DWD_INLINE {
                     int32x4_t acc[4];
                     for (int j = 0; j < 4; ++j) {
                       acc[j] = vld1q_s32(start + 4 * j);
                       acc[j] = vdotq_s32(acc[j], c0v[j], vld1q_s8(panel + 16 * j));
                       acc[j] = vdotq_s32(acc[j], c1v[j], vld1q_s8(panel + 64 + 16 * j));
                       acc[j] = vdotq_s32(acc[j], c2v[j], vld1q_s8(panel + 128 + 16 * j));
                     }
                     vst1q_s8(o + ox * oc, rq(acc));
                   };
  // the pixels [lo, hi) read columns inside the input only (past the carried ones)
  const ptrdiff_t right = in_w - 3 - first;
  const size_t hi = right < 0 ? 0 : std::min(out_w, static_cast<size_t>(right / S + 1));
  const ptrdiff_t left = -first - 3 + S;  // pixel ox's first new column, S * ox + 3 - S, inside from ox >= left / S
  const size_t lo = std::min(hi, left <= 0 ? size_t{0} : static_cast<size_t>((left + S - 1) / S));
  int8x16_t m[4], n[4];
  size_t ox = 0;
  if constexpr (S == 2) {
    // A column serves at most two pixels, the third of one and the first of the next: its
    // products go into both pixels' accumulators at once. The next pixel's carry over in
    // memory, not registers: the compiler copies registers carried round a loop (vector
    // moves, on the NEON pipes this loop is bound by); a store and a load take none.
    alignas(16) int32_t carried[16];
    __asm__("" : : "r"(carried));  // escapes: kept in memory, as an int8 store may alias it
    auto begin = [&](int32x4_t(&acc)[4], const int8x16_t(&c)[4]) EDGEINF_DWD_INLINE {
      for (int j = 0; j < 4; ++j) acc[j] = vdotq_s32(vld1q_s32(start + 4 * j), c[j], vld1q_s8(panel + 16 * j));
    };
    auto add = [&](int32x4_t(&acc)[4], const int8x16_t(&c)[4], int kx) EDGEINF_DWD_INLINE {
      for (int j = 0; j < 4; ++j) acc[j] = vdotq_s32(acc[j], c[j], vld1q_s8(panel + 64 * kx + 16 * j));
    };
    auto carry = [&](const int8x16_t(&c)[4]) EDGEINF_DWD_INLINE {
      int32x4_t acc[4];
      begin(acc, c);
      for (int j = 0; j < 4; ++j) vst1q_s32(carried + 4 * j, acc[j]);
    };
    auto resume = [&](int32x4_t(&acc)[4]) EDGEINF_DWD_INLINE {
      for (int j = 0; j < 4; ++j) acc[j] = vld1q_s32(carried + 4 * j);
    };
    int32x4_t a[4], b[4];
    // the carried pixel finished from its second and third columns into dst, the next begun
    // from the third where there is one
    auto one = [&](const int8x16_t(&c1)[4], const int8x16_t(&c2)[4], bool next, int8_t* dst) EDGEINF_DWD_INLINE {
      resume(a);
      add(a, c1, 1);
      add(a, c2, 2);
      if (next) carry(c2);
      vst1q_s8(dst, rq(a));
    };
    column(0, n);
    carry(n);
    for (; ox < lo; ++ox) {  // at the left edge
      column(2 * ox + 1, m);
      column(2 * ox + 2, n);
      one(m, n, ox + 1 < out_w, o + ox * oc);
    }
    // two pixels an iteration, the second's accumulators begun in registers; the columns
    // found by one byte offset and the pixels by one pointer, each stepped once
    if (ox + 2 <= hi) {
      size_t at = static_cast<size_t>(first + static_cast<ptrdiff_t>(2 * ox + 1)) * oc;
      int8_t* dst = o + ox * oc;
      const size_t pairs = (hi - ox) / 2;
      for (size_t i = 0; i < pairs; ++i, at += 4 * oc, dst += 2 * oc) {
        at_offset(at, m);
        at_offset(at + oc, n);
        resume(a);
        add(a, m, 1);
        add(a, n, 2);
        begin(b, n);
        vst1q_s8(dst, rq(a));
        at_offset(at + 2 * oc, m);
        at_offset(at + 3 * oc, n);
        add(b, m, 1);
        add(b, n, 2);
        carry(n);
        vst1q_s8(dst + oc, rq(b));
      }
      ox += 2 * pairs;
    }
    if (ox < hi) {  // the last one inside
      inside(2 * ox + 1, m);
      inside(2 * ox + 2, n);
      one(m, n, ox + 1 < out_w, o + ox * oc);
      ++ox;
    }
    for (; ox < out_w; ++ox) {  // at the right edge; the last pixel begins none
      column(2 * ox + 1, m);
      column(2 * ox + 2, n);
      one(m, n, ox + 1 < out_w, o + ox * oc);
    }
  } else {
    int8x16_t p[4];
    column(0, p);
    column(1, m);
    auto one = [&](size_t x) EDGEINF_DWD_INLINE {  // at the edges: the carried columns copied
      column(x + 2, n);
      pixel(p, m, n, x);
      for (int j = 0; j < 4; ++j) p[j] = m[j], m[j] = n[j];
    };
    for (; ox < lo; ++ox) one(ox);
    for (; ox + 3 <= hi; ox += 3) {  // three pixels an iteration: the columns change names, not registers
      inside(ox + 2, n);
      pixel(p, m, n, ox);
      inside(ox + 3, p);
      pixel(m, n, p, ox + 1);
      inside(ox + 4, m);
      pixel(n, p, m, ox + 2);
    }
    for (; ox < out_w; ++ox) one(ox);
  }
}

// row_in_registers for the first `blocks` blocks of 16 channels of one output row; panels:
// the first block's panel, each block's panel_step bytes further. Not inlined: in the
// caller's loops the compiler spills the row pointers.
template <int S, bool R3, int C, neon_rq::Form F>
__attribute__((noinline)) void rows_in_registers(const int8_t* const* r, ptrdiff_t first, ptrdiff_t in_w, size_t oc,
                                                 size_t blocks, size_t out_w, const int8_t* panels, size_t panel_step,
                                                 const int32_t* start, const Output& q, int8x16_t padding, int8_t* o) {
  for (size_t blk = 0; blk < blocks; ++blk) {
    const size_t c0 = std::min(blk * 16, oc - 16);
    row_in_registers<S, R3, C, F>(r, first, in_w, oc, c0, out_w, panels + blk * panel_step, start + c0, q, padding,
                                  o + c0);
  }
}

// The requantization's form F fixed at compile time: with the float form's branch and its
// unused parameters left out, a pixel pair's accumulators and the parameters stay in registers.
template <int KW, int G, neon_rq::Form F>
void run_form(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out, const Output& q, size_t blocks) {
  const size_t oc = g.in_c * g.depth_multiplier;
  const int8_t zp = static_cast<int8_t>(w.input_zero_point());
  const size_t groups = w.neondot_row_groups(), column = groups * kGroupBytes;
  // columns read by an output row: from the first pixel's first tap to the last one's last
  const ptrdiff_t first = -g.pad_left, in_w = static_cast<ptrdiff_t>(g.in_w);
  const size_t ncols = (g.out_w - 1) * g.stride_w + (g.k_w - 1) * g.dilation_w + 1;
  const Window<KW, G> win{g.k_w, groups, g.stride_w * column, g.dilation_w * column};
  std::vector<int8_t> cols(ncols * column);
  DwRows rows(g, in, zp);
  std::vector<const int8_t*> rp(g.k_h), group_rows(4 * groups);
  const int8x16_t padding = vdupq_n_s8(zp);
  const int32_t* start = w.bias_minus_zero_point_terms();
  const bool in_registers = KW == 3 && G == 1 && g.dilation_w == 1;
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp.data());
      for (size_t i = 0; i < 4 * groups; ++i) group_rows[i] = rp[std::min(i, g.k_h - 1)];
      int8_t* o = out + (b * g.out_h + oy) * g.out_w * oc;
      if (in_registers && g.stride_w == 2) {
        // the filter's rows (R3) and whether the output clamps (C) fixed
        auto row = [&](auto r3, auto c) {
          rows_in_registers<2, r3(), c(), F>(group_rows.data(), first, in_w, oc, blocks, g.out_w, w.neondot_panel(),
                                             3 * column, start, q, padding, o);
        };
        using Yes = std::true_type;
        using No = std::false_type;
        using Clamps = std::integral_constant<int, 1>;
        using Passes = std::integral_constant<int, 0>;
        if (g.k_h > 3) {
          row(Yes{}, Clamps{});
        } else {
          q.clamps ? row(No{}, Clamps{}) : row(No{}, Passes{});
        }
        continue;
      }
      for (size_t blk = 0; blk < blocks; ++blk) {
        const size_t c0 = std::min(blk * 16, oc - 16);
        if (in_registers) {
          row_in_registers<1, true, -1, F>(group_rows.data(), first, in_w, oc, c0, g.out_w,
                                           w.neondot_panel() + blk * 3 * column, start + c0, q, padding, o + c0);
          continue;
        }
        for (size_t x = 0; x < ncols; ++x) {
          const ptrdiff_t ix = first + static_cast<ptrdiff_t>(x);
          int8_t* d = cols.data() + x * column;
          if (ix < 0 || ix >= in_w) {
            for (size_t i = 0; i < column; i += 16) vst1q_s8(d + i, padding);  // zero points, interleaved
            continue;
          }
          const size_t at = static_cast<size_t>(ix) * oc + c0;
          for (size_t gr = 0; gr < win.row_groups(); ++gr) {
            const int8_t* const* r = group_rows.data() + 4 * gr;
            interleave(r[0] + at, r[1] + at, r[2] + at, r[3] + at, d + gr * kGroupBytes);
          }
        }
        const int8_t* panel = w.neondot_panel() + blk * g.k_w * column;
        const int32_t* s = start + c0;
        const neon_rq::Requantize16Of<F> rq(q, c0);  // in registers across the row
        size_t ox = 0;
        for (; ox + 2 <= g.out_w; ox += 2)
          pixels<2>(win, cols.data() + ox * win.pixel_step, panel, s, rq, o + ox * oc + c0, oc);
        if (ox < g.out_w) pixels<1>(win, cols.data() + ox * win.pixel_step, panel, s, rq, o + ox * oc + c0, oc);
      }
    }
  }
}

// The first `blocks` blocks of 16 channels.
template <int KW, int G>
void run(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out, size_t blocks) {
  const Output q(w.requantization(), w.neon_float_requantization());
  switch (neon_rq::fastest_form(q, g.in_c * g.depth_multiplier)) {
    case neon_rq::Form::kFloat:
      return run_form<KW, G, neon_rq::Form::kFloat>(w, g, in, out, q, blocks);
    case neon_rq::Form::kFloatSplit:
      return run_form<KW, G, neon_rq::Form::kFloatSplit>(w, g, in, out, q, blocks);
    case neon_rq::Form::kFixedRight:
      return run_form<KW, G, neon_rq::Form::kFixedRight>(w, g, in, out, q, blocks);
    default:
      return run_form<KW, G, neon_rq::Form::kFixedPoint>(w, g, in, out, q, blocks);
  }
}

}  // namespace
}  // namespace dwconv_neondot

void qs8_dwconv2d__neondot(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using namespace dwconv_neondot;
  if (g.batch == 0 || g.out_h == 0 || g.out_w == 0) return;
  // Fewer than 16 channels, or a horizontal stride above 2, where each interleaved column
  // serves at most one pixel of a 3x3 filter and the interleaving costs more than it saves:
  // the plain NEON kernel. At stride 2 a column serves one or two pixels, which the SDOTs
  // still repay (estimated on the Cortex-A76).
  if (w.neondot_blocks() == 0 || g.stride_w > 2) return qs8_dwconv2d__neon(w, g, in, out);
  // Eight channels or fewer past the last whole block of 16, where the plain NEON kernel
  // runs its 3x3 loops: those channels there, as one block of 8 (estimated on the
  // Cortex-A76 at about 0.6 of the overlapping block of 16 they would take here).
  const size_t oc = g.in_c * g.depth_multiplier, whole = oc / 16, rest = oc % 16;
  size_t blocks = w.neondot_blocks();
  if (rest != 0 && rest <= 8 && qs8_dwconv2d__neon_runs_3x3(w, g)) {
    blocks = whole;
    qs8_dwconv2d__neon_from(w, g, in, out, 16 * whole);
  }
  // the filters of the face models, unrolled; any other as given
  if (g.k_w == 3 && g.k_h <= 4) return run<3, 1>(w, g, in, out, blocks);
  if (g.k_w == 5 && g.k_h > 4 && g.k_h <= 8) return run<5, 2>(w, g, in, out, blocks);
  run<0, 0>(w, g, in, out, blocks);
}

}  // namespace edgeinf::qs8
