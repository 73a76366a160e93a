// AVX-512 depthwise conv2d for the avx512vnni path: 32 channels per step, two filter taps
// per zmm VPMADDWD.
//
// The arithmetic is the AVX2 kernel's (avx2.cc): raw int8 inputs of two taps widened to
// int16 and interleaved, multiplied with interleaved weights, the zero point folded into
// the start value. A zmm holds two of the AVX2 kernel's 16-channel blocks side by side:
// VPUNPCKL/HWD work within 128-bit lanes, so the low (high) 256 bits of each accumulator
// are exactly the AVX2 accumulator of the first (second) block, and each block is
// requantized by rq_avx2_inl.h with its own parameters (bit-exact like the AVX2 kernel).
//
// Blocks are paired in order (0-1, 2-3, ...). A pair whose second block does not start 16
// channels after the first (the overlapping last block of DwWeights) loads its two
// 16-channel halves separately; the stores are then of equal values where the blocks
// overlap. An odd number of blocks runs the AVX2 kernel instead: a lone block in a zmm
// would do twice its work (16 channels, one block, ran 1.6x slower than on AVX2). Fewer
// than 16 channels take the scalar tail, as on AVX2, so the planner pads those layers the
// same way for both kernels.
//
// Weights are repacked per call into zmm panels: per pair of blocks and tap pair, 64 int16
// (the AVX2 panel's half 0 of both blocks, then half 1 of both).
// GCC 12's AVX-512 intrinsics pass an uninitialized "undefined" vector as the unused
// masked-off operand and then warn about it where they are inlined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "../../quant/rq_avx2_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {
// A namespace of its own: the objdump test (tests/kernels/test_qs8_vnni.py) tells this
// file's AVX-512 functions from avx2.cc's namesakes by it.
namespace dwconv_zmm {
namespace {

using namespace avx2_rq;

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Halves of a zmm and a zmm of two halves by vector shuffles: GCC 12's extract and insert
// intrinsics warn of the undefined value they pass for the unused mask operand.
inline __m256i half256(__m512i v, int h) {
  const __v8di x = reinterpret_cast<__v8di>(v);
  return reinterpret_cast<__m256i>(h == 0 ? __builtin_shufflevector(x, x, 0, 1, 2, 3)
                                          : __builtin_shufflevector(x, x, 4, 5, 6, 7));
}

inline __m512i concat256(__m256i lo, __m256i hi) {
  return reinterpret_cast<__m512i>(
      __builtin_shufflevector(reinterpret_cast<__v4di>(lo), reinterpret_cast<__v4di>(hi), 0, 1, 2, 3, 4, 5, 6, 7));
}

// 32 channels widened to int16: 32 contiguous bytes at p, or 16 at p and 16 at p + d.
template <bool kContiguous>
inline __m512i widen32(const int8_t* p, ptrdiff_t d) {
  if constexpr (kContiguous) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + d));
    return _mm512_cvtepi8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
  }
}

// The start values of two blocks' accumulator half h, side by side.
inline __m512i start32(const int32_t* prm0, const int32_t* prm1, size_t h) {
  return concat256(load(prm0 + kRqStart * 16 + h * 8), load(prm1 + kRqStart * 16 + h * 8));
}

// Requantization of two blocks in zmm, the operations of rq_avx2_inl.h lane for lane: each
// parameter vector is the two blocks' half h side by side. VPSIGND has no zmm form: a masked
// subtraction negates the lanes where y < 0 (where y is 0 the shifted magnitude is 0 too).
inline __m512i params32(const int32_t* prm0, const int32_t* prm1, RqParam k, size_t h) {
  return concat256(load(prm0 + k * 16 + h * 8), load(prm1 + k * 16 + h * 8));
}

template <bool kLeft, bool kRight>
inline __m512i mbqm16(__m512i x, const int32_t* prm0, const int32_t* prm1, size_t h) {
  if (kLeft) x = _mm512_sllv_epi32(x, params32(prm0, prm1, kRqLeftShift, h));
  const __m512i round = _mm512_set1_epi64(int64_t{1} << 30);
  const __m512i even =
      _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, params32(prm0, prm1, kRqMultiplier, h)), round), 31);
  const __m512i odd_sum =
      _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), params32(prm0, prm1, kRqMultiplierOdd, h)), round);
  const __m512i y = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_add_epi64(odd_sum, odd_sum));
  if (!kRight) return y;
  const __m512i mag = _mm512_add_epi32(_mm512_abs_epi32(y), params32(prm0, prm1, kRqHalf, h));
  const __m512i r = _mm512_srlv_epi32(mag, params32(prm0, prm1, kRqRightShift, h));
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_mask_sub_epi32(r, _mm512_cmplt_epi32_mask(y, zero), zero, r);
}

template <bool kSplit>
inline __m512i float_form16(__m512i acc, const int32_t* prm0, const int32_t* prm1, size_t h) {
  const __m512 x = _mm512_cvtepi32_ps(acc);
  __m512 offset = _mm512_castsi512_ps(params32(prm0, prm1, kRqOffset, h));
  if (kSplit) {
    const __mmask16 negative = _mm512_cmplt_epi32_mask(acc, _mm512_setzero_si512());
    offset = _mm512_mask_blend_ps(negative, offset, _mm512_castsi512_ps(params32(prm0, prm1, kRqOffsetNeg, h)));
  }
  const __m512 scale = _mm512_castsi512_ps(params32(prm0, prm1, kRqScale, h));
  return _mm512_cvtps_epi32(_mm512_fmadd_ps(x, scale, offset));
}

struct Output32 {
  __m512i zero_point16;
  __m256i lo, hi;
  explicit Output32(const Requantization& rq)
      : zero_point16(_mm512_set1_epi16(static_cast<int16_t>(rq.output_zero_point))),
        lo(_mm256_set1_epi8(static_cast<char>(rq.act_min))),
        hi(_mm256_set1_epi8(static_cast<char>(rq.act_max))) {}
};

// Requantizes and stores both blocks of a pair (block 1 after block 0: on overlap, its
// values overwrite equal ones). VPACKSSDW works within 128-bit lanes, which hold channels
// 0-7, 8-15 of block 0 and of block 1 after it; VPMOVSWB is VPACKSSWB's saturation.
template <int kRq, bool kContiguous>
inline void requantize_store32(__m512i acc0, __m512i acc1, const int32_t* prm0, const int32_t* prm1, const Output32& q,
                               int8_t* o0, int8_t* o1) {
  constexpr bool kLeft = (kRq & kRqLeft) != 0, kRight = (kRq & kRqRight) != 0;
  __m512i v16;
  if constexpr ((kRq & kRqFloat) != 0) {
    v16 = _mm512_packs_epi32(float_form16<kRight>(acc0, prm0, prm1, 0), float_form16<kRight>(acc1, prm0, prm1, 1));
  } else {
    v16 = _mm512_packs_epi32(mbqm16<kLeft, kRight>(acc0, prm0, prm1, 0), mbqm16<kLeft, kRight>(acc1, prm0, prm1, 1));
    v16 = _mm512_adds_epi16(v16, q.zero_point16);
  }
  __m256i v8 = _mm512_cvtsepi16_epi8(v16);
  if (kRq & kRqClamp) v8 = _mm256_min_epi8(_mm256_max_epi8(v8, q.lo), q.hi);
  if constexpr (kContiguous) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o0), v8);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o0), _mm256_castsi256_si128(v8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o1), _mm256_extracti128_si256(v8, 1));
  }
}

struct Ctx {
  const DwWeights& w;
  const DwGeometry& g;
  size_t oc, blocks, npairs;
  size_t last_c0;  // the first channel of the last block (oc - 16 when it overlaps the one before)
  size_t full;     // channels the blocks compute; the rest take the scalar tail
  size_t block_c0(size_t b) const { return std::min(b * 16, last_c0); }
  size_t pairs_of_blocks() const { return blocks / 2; }  // blocks is even
  size_t second_block(size_t s) const { return 2 * s + 1; }
  std::vector<int> ky, kx;     // per pair element (2 per pair; a single tap repeats its tap)
  std::vector<int16_t> panel;  // [pair of blocks][tap pair][2 halves][2 blocks][16] int16
  Output32 q;
};

// Calls body(kContiguous, s, c0, c1) for every pair of blocks s.
template <class Body>
inline void for_block_pairs(const Ctx& c, Body&& body) {
  for (size_t s = 0; s < c.pairs_of_blocks(); ++s) {
    const size_t c0 = c.block_c0(2 * s), c1 = c.block_c0(c.second_block(s));
    if (c1 == c0 + 16) {
      body(std::true_type(), s, c0, c1);
    } else {
      body(std::false_type(), s, c0, c1);
    }
  }
}

// All full channel blocks of one output pixel; src holds 2 input pointers per pair.
template <int kPairs, int kRq>
void pixel(const Ctx& c, const int8_t* const* src, int8_t* o) {
  const size_t npairs = kPairs ? kPairs : c.npairs;
  const int32_t* prm = c.w.avx2_params();
  for_block_pairs(c, [&](auto contiguous, size_t s, size_t c0, size_t c1) {
    constexpr bool kContiguous = decltype(contiguous)::value;
    const ptrdiff_t d = static_cast<ptrdiff_t>(c1 - c0);
    const int32_t* prm0 = prm + 2 * s * kRqParams * 16;
    const int32_t* prm1 = prm + c.second_block(s) * kRqParams * 16;
    const int16_t* wp = c.panel.data() + s * npairs * 64;
    __m512i acc0 = start32(prm0, prm1, 0), acc1 = start32(prm0, prm1, 1);
    for (size_t p = 0; p < npairs; ++p, wp += 64) {
      const __m512i a0 = widen32<kContiguous>(src[2 * p] + c0, d), a1 = widen32<kContiguous>(src[2 * p + 1] + c0, d);
      acc0 = _mm512_add_epi32(acc0, _mm512_madd_epi16(_mm512_unpacklo_epi16(a0, a1), load512(wp)));
      acc1 = _mm512_add_epi32(acc1, _mm512_madd_epi16(_mm512_unpackhi_epi16(a0, a1), load512(wp + 32)));
    }
    requantize_store32<kRq, kContiguous>(acc0, acc1, prm0, prm1, c.q, o + c0, o + c1);
  });
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
        if (c.blocks > 0) pixel<kPairs, kRq>(c, src.data(), o);
        if (full < c.oc) dwconv_pixel_channels(c.w, g, in, b, oy, ox, full, c.oc, o);
      }
    }
  }
}

// 3x3 filter, dilation 1, horizontal stride S: N adjacent output pixels per step, each
// input column widened and interleaved once for all the pixels that use it (avx2.cc's
// schedule). `cols` gives the step's input column i of filter row ky.
template <int S, int N, int kRq, class Cols>
inline void step3x3(const Ctx& c, const Cols& cols, int8_t* o) {
  constexpr int kSpan = (N - 1) * S + 3;
  const int32_t* prm = c.w.avx2_params();
  for_block_pairs(c, [&](auto contiguous, size_t s, size_t c0, size_t c1) {
    constexpr bool kContiguous = decltype(contiguous)::value;
    const ptrdiff_t d = static_cast<ptrdiff_t>(c1 - c0);
    const int32_t* prm0 = prm + 2 * s * kRqParams * 16;
    const int32_t* prm1 = prm + c.second_block(s) * kRqParams * 16;
    const int16_t* wp = c.panel.data() + s * 5 * 64;
    const __m512i start0 = start32(prm0, prm1, 0), start1 = start32(prm0, prm1, 1);
    __m512i acc[N][2];
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      acc[n][0] = start0;
      acc[n][1] = start1;
    }
    __m512i prev = widen32<kContiguous>(cols(2, 0) + c0, d);
#pragma GCC unroll 16
    for (int i = 0; i < kSpan; ++i) {
      const __m512i a0 = widen32<kContiguous>(cols(0, i) + c0, d), a1 = widen32<kContiguous>(cols(1, i) + c0, d);
      const __m512i lo = _mm512_unpacklo_epi16(a0, a1), hi = _mm512_unpackhi_epi16(a0, a1);
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) {
        const int kx = i - n * S;
        if (kx < 0 || kx > 2) continue;
        acc[n][0] = _mm512_add_epi32(acc[n][0], _mm512_madd_epi16(lo, load512(wp + kx * 64)));
        acc[n][1] = _mm512_add_epi32(acc[n][1], _mm512_madd_epi16(hi, load512(wp + kx * 64 + 32)));
      }
      const __m512i next = i + 1 < kSpan ? widen32<kContiguous>(cols(2, i + 1) + c0, d) : prev;
      bool used = false;
#pragma GCC unroll 8
      for (int n = 0; n < N; ++n) used = used || i == n * S || i == n * S + 2;
      if (used) {
        const __m512i hlo = _mm512_unpacklo_epi16(prev, next), hhi = _mm512_unpackhi_epi16(prev, next);
#pragma GCC unroll 8
        for (int n = 0; n < N; ++n) {
          if (i != n * S && i != n * S + 2) continue;
          const int16_t* pw = wp + (i == n * S ? 3 : 4) * 64;
          acc[n][0] = _mm512_add_epi32(acc[n][0], _mm512_madd_epi16(hlo, load512(pw)));
          acc[n][1] = _mm512_add_epi32(acc[n][1], _mm512_madd_epi16(hhi, load512(pw + 32)));
        }
      }
      prev = next;
    }
#pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      requantize_store32<kRq, kContiguous>(acc[n][0], acc[n][1], prm0, prm1, c.q, o + n * c.oc + c0, o + n * c.oc + c1);
    }
  });
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

// The zmm panels from the AVX2 panel ([block][tap pair][2 halves][16] int16).
std::vector<int16_t> pack_panel(const Ctx& c) {
  std::vector<int16_t> panel(c.pairs_of_blocks() * c.npairs * 64);
  const int16_t* src = c.w.avx2_pairs();
  for (size_t s = 0; s < c.pairs_of_blocks(); ++s) {
    const size_t blocks[2] = {2 * s, c.second_block(s)};
    for (size_t p = 0; p < c.npairs; ++p) {
      int16_t* dst = panel.data() + (s * c.npairs + p) * 64;
      for (size_t h = 0; h < 2; ++h) {
        for (size_t k = 0; k < 2; ++k) {
          std::copy_n(src + (blocks[k] * c.npairs + p) * 32 + h * 16, 16, dst + h * 32 + k * 16);
        }
      }
    }
  }
  return panel;
}

}  // namespace
}  // namespace dwconv_zmm

void qs8_dwconv2d__avx512vnni(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using namespace dwconv_zmm;
  const Requantization& rq = w.requantization();
  Ctx c{w, g, g.in_c * g.depth_multiplier, 0, w.pairs().size(), 0, 0, {}, {}, {}, Output32(rq)};
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
  if (c.blocks % 2 == 1) return qs8_dwconv2d__avx2(w, g, in, out);
  if (c.blocks > 0) c.panel = pack_panel(c);
  DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
  with_rq_flags(call_flags(w.avx2_rq_flags()), [&](auto flags) { dispatch_pairs<flags()>(c, in, rows, out); });
}

}  // namespace edgeinf::qs8
