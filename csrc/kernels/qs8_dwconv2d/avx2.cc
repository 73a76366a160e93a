// AVX2 depthwise conv2d: 16 channels per step, two filter taps per VPMADDWD.
//
// Raw int8 inputs of two taps are sign-extended, interleaved as int16 pairs and
// multiplied with interleaved weights (a pair sum is at most 2 * 128 * 128, exact in
// int32); the zero point enters as bias - zp * sum(w), so a padded tap, which reads the
// zero point, adds zp * w - zp * w = 0 like the reference's skipped tap, and the total
// equals the reference accumulator modulo 2^32. Accumulators stay in VPUNPCKL/HWD's lane
// order (channels 0-3, 8-11 | 4-7, 12-15), for which the weights and the per-channel
// requantization parameters are packed; VPACKSSDW restores channel order.
//
// Requantization: rq_avx2_inl.h (TFLite's fixed-point arithmetic, or the float form where
// construction found it exact; bit-exact either way).
//
// Schedules: a 3x3 filter with dilation 1 and a horizontal stride of 1 (2) computes 4 (3)
// adjacent output pixels per step, each input column widened and interleaved once for
// all the pixels that use it (the vertical pair of filter rows 0-1 and the last row's
// horizontal pairs); other filters go pixel by pixel with one pointer per tap. A depth
// multiplier above 1 reads rows with repeated channels (DwRows), so it runs the same code.
// A channel count above 16 that is not a multiple of 16 ends with a block overlapping the
// one before (DwWeights); fewer channels than 16 take the scalar tail.
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "../../quant/rq_avx2_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {
namespace {

using namespace avx2_rq;

template <int kRq>
inline void requantize_store(__m256i acc0, __m256i acc1, const int32_t* prm, const Output& q, int8_t* o) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o), requantize16<kRq>(acc0, acc1, prm, q));
}

inline __m256i widen16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

struct Ctx {
  const DwWeights& w;
  const DwGeometry& g;
  size_t oc, blocks, npairs;
  size_t last_c0;  // the first channel of the last block (oc - 16 when it overlaps the one before)
  size_t full;     // channels the blocks compute; the rest take the scalar tail
  size_t block_c0(size_t b) const { return std::min(b * 16, last_c0); }
  std::vector<int> ky, kx;  // per pair element (2 per pair; a single tap repeats its tap)
  Output q;
};

// All full channel blocks of one output pixel; src holds 2 input pointers per pair.
template <int kPairs, int kRq>
void pixel(const Ctx& c, const int8_t* const* src, int8_t* o) {
  const size_t npairs = kPairs ? kPairs : c.npairs;
  const int16_t* wp = c.w.avx2_pairs();
  const int32_t* prm = c.w.avx2_params();
  for (size_t b = 0; b < c.blocks; ++b, prm += kRqParams * 16) {
    const size_t c0 = c.block_c0(b);
    __m256i acc0 = load(prm + kRqStart * 16), acc1 = load(prm + kRqStart * 16 + 8);
    for (size_t p = 0; p < npairs; ++p, wp += 32) {
      const __m256i a0 = widen16(src[2 * p] + c0), a1 = widen16(src[2 * p + 1] + c0);
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(_mm256_unpacklo_epi16(a0, a1), load(wp)));
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(_mm256_unpackhi_epi16(a0, a1), load(wp + 16)));
    }
    requantize_store<kRq>(acc0, acc1, prm, c.q, o + c0);
  }
}

template <int kPairs, int kRq>
void run_pixels(const Ctx& c, const int8_t* in, DwRows& rows, int8_t* out) {
  const DwGeometry& g = c.g;
  std::vector<const int8_t*> rp(g.k_h), src(2 * c.npairs);
  const size_t full = c.full;
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp.data());
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        for (size_t e = 0; e < 2 * c.npairs; ++e) {
          const ptrdiff_t ix = ix0 + c.kx[e] * static_cast<ptrdiff_t>(g.dilation_w);
          src[e] = ix >= 0 && ix < static_cast<ptrdiff_t>(g.in_w) ? rp[c.ky[e]] + ix * c.oc : rows.zero_row();
        }
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * c.oc;
        pixel<kPairs, kRq>(c, src.data(), o);
        if (full < c.oc) dwconv_pixel_channels(c.w, g, in, b, oy, ox, full, c.oc, o);
      }
    }
  }
}

// 3x3 filter, dilation 1, horizontal stride S: N adjacent output pixels per step. Each
// input column's vertical pair (filter rows 0 and 1) and the last row's horizontal pairs
// are widened and interleaved once for every pixel of the step that uses them. `cols`
// gives the step's input column i of filter row ky (Columns or Table below).
template <int S, int N, int kRq, class Cols>
inline void step3x3(const Ctx& c, const Cols& cols, int8_t* o) {
  constexpr int kSpan = (N - 1) * S + 3;
  const int16_t* wp = c.w.avx2_pairs();
  const int32_t* prm = c.w.avx2_params();
  for (size_t blk = 0; blk < c.blocks; ++blk, prm += kRqParams * 16, wp += 5 * 32) {
    const size_t c0 = c.block_c0(blk);
    __m256i acc[N][2];
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      acc[n][0] = load(prm + kRqStart * 16);
      acc[n][1] = load(prm + kRqStart * 16 + 8);
    }
    // Column by column: the vertical pair of filter rows 0-1, then the last row's
    // horizontal pair (i, i + 1): pixel n takes columns (nS, nS + 1) as pair 3 and column
    // nS + 2 as pair 4, whose partner weight is zero.
    __m256i prev = widen16(cols(2, 0) + c0);
#pragma GCC unroll 16
    for (int i = 0; i < kSpan; ++i) {
      const __m256i a0 = widen16(cols(0, i) + c0), a1 = widen16(cols(1, i) + c0);
      const __m256i lo = _mm256_unpacklo_epi16(a0, a1), hi = _mm256_unpackhi_epi16(a0, a1);
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) {
        const int kx = i - n * S;
        if (kx < 0 || kx > 2) continue;
        acc[n][0] = _mm256_add_epi32(acc[n][0], _mm256_madd_epi16(lo, load(wp + kx * 32)));
        acc[n][1] = _mm256_add_epi32(acc[n][1], _mm256_madd_epi16(hi, load(wp + kx * 32 + 16)));
      }
      const __m256i next = i + 1 < kSpan ? widen16(cols(2, i + 1) + c0) : prev;
      bool used = false;
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) used = used || i == n * S || i == n * S + 2;
      if (used) {
        const __m256i hlo = _mm256_unpacklo_epi16(prev, next), hhi = _mm256_unpackhi_epi16(prev, next);
#pragma GCC unroll 8
        for (int n = 0; n < N; ++n) {
          if (i != n * S && i != n * S + 2) continue;
          const int16_t* pw = wp + (i == n * S ? 3 : 4) * 32;
          acc[n][0] = _mm256_add_epi32(acc[n][0], _mm256_madd_epi16(hlo, load(pw)));
          acc[n][1] = _mm256_add_epi32(acc[n][1], _mm256_madd_epi16(hhi, load(pw + 16)));
        }
      }
      prev = next;
      // keeps GCC from regrouping the sums across columns, which spills: with stride 1, and
      // with stride 2 in the float form (22 stack moves per step without it; stride 2 in the
      // fixed-point form does not spill and ran 1-3% faster without it)
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) {
        if (S == 1 || (kRq & kRqFloat)) asm("" : "+x"(acc[n][0]), "+x"(acc[n][1]));
      }
    }
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) requantize_store<kRq>(acc[n][0], acc[n][1], prm, c.q, o + n * c.oc + c0);
  }
}

// A step's columns inside the image: addresses from the row pointers, not loaded.
struct Columns {
  const int8_t* row[3];  // the step's first column in each filter row
  size_t stride;         // values per pixel
  const int8_t* operator()(int ky, int i) const { return row[ky] + i * stride; }
};

// A step's columns through a table, the zero row standing for the padding.
struct Table {
  const int8_t* const* cols;  // [3][span]
  int span;
  const int8_t* operator()(int ky, int i) const { return cols[ky * span + i]; }
};

template <int S, int N, int kRq>
void run3x3(const Ctx& c, const int8_t* in, DwRows& rows, int8_t* out) {
  const DwGeometry& g = c.g;
  constexpr int kSpan = (N - 1) * S + 3;
  const int8_t* rp[3];
  const int8_t* cols[3 * kSpan];
  const size_t full = c.full;
  const ptrdiff_t in_w = static_cast<ptrdiff_t>(g.in_w);
  // Step of `n` pixels from output column ox.
  auto step = [&](auto n, size_t ox, int8_t* o) {
    constexpr int kN = decltype(n)::value, span = (kN - 1) * S + 3;
    const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * S) - g.pad_left;
    if (ix0 >= 0 && ix0 + span <= in_w) {
      const Columns at{{rp[0] + ix0 * c.oc, rp[1] + ix0 * c.oc, rp[2] + ix0 * c.oc}, c.oc};
      return step3x3<S, kN, kRq>(c, at, o);
    }
    for (int ky = 0; ky < 3; ++ky) {
      for (int i = 0; i < span; ++i) {
        const ptrdiff_t x = ix0 + i;
        cols[ky * span + i] = x >= 0 && x < in_w ? rp[ky] + x * c.oc : rows.zero_row();
      }
    }
    step3x3<S, kN, kRq>(c, Table{cols, span}, o);
  };
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp);
      int8_t* orow = out + (b * g.out_h + oy) * g.out_w * c.oc;
      size_t ox = 0;
      for (; ox + N <= g.out_w; ox += N) step(std::integral_constant<int, N>(), ox, orow + ox * c.oc);
      if (N > 2 && ox + 2 <= g.out_w) {
        step(std::integral_constant<int, 2>(), ox, orow + ox * c.oc);
        ox += 2;
      }
      for (; ox < g.out_w; ++ox) step(std::integral_constant<int, 1>(), ox, orow + ox * c.oc);
      if (full < c.oc) {
        for (ox = 0; ox < g.out_w; ++ox) dwconv_pixel_channels(c.w, g, in, b, oy, ox, full, c.oc, orow + ox * c.oc);
      }
    }
  }
}

template <int kPairs, int kRq>
void run(const Ctx& c, const int8_t* in, DwRows& rows, int8_t* out) {
  const DwGeometry& g = c.g;
  if (kPairs == 5 && g.k_h == 3 && g.k_w == 3 && g.dilation_w == 1 && c.blocks > 0) {
    if (g.stride_w == 1) return run3x3<1, 4, kRq>(c, in, rows, out);
    // 3 pixels: 6 accumulators leave registers for the weights (4 reloaded them)
    if (g.stride_w == 2) return run3x3<2, 3, kRq>(c, in, rows, out);
  }
  run_pixels<kPairs, kRq>(c, in, rows, out);
}

template <int kRq>
void dispatch_pairs(const Ctx& c, const int8_t* in, DwRows& rows, int8_t* out) {
  switch (c.npairs) {
    case 5:  // 3x3
      return run<5, kRq>(c, in, rows, out);
    case 13:  // 5x5
      return run<13, kRq>(c, in, rows, out);
    default:
      return run<0, kRq>(c, in, rows, out);
  }
}

}  // namespace

void qs8_dwconv2d__avx2(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  const Requantization& rq = w.requantization();
  Ctx c{w, g, g.in_c * g.depth_multiplier, 0, w.pairs().size(), 0, 0, {}, {}, Output(rq)};
  if (w.avx2_last_block_overlaps()) {
    c.blocks = w.padded_channels() / 16;
    c.full = c.oc;
    c.last_c0 = c.oc - 16;
  } else {
    c.blocks = c.oc / 16;
    c.full = c.blocks * 16;
    c.last_c0 = c.full;
  }
  for (const DwTapPair& p : w.pairs()) {
    for (int t : {p.first, p.second < 0 ? p.first : p.second}) {
      c.ky.push_back(t / static_cast<int>(g.k_w));
      c.kx.push_back(t % static_cast<int>(g.k_w));
    }
  }
  DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
  with_rq_flags(call_flags(w.avx2_rq_flags()), [&](auto flags) { dispatch_pairs<flags()>(c, in, rows, out); });
}

}  // namespace edgeinf::qs8
