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

// The parameters of a pair of AVX2 blocks (avx2_params()).
struct BlockPairParams {
  const int32_t* prm0;
  const int32_t* prm1;
  __m512i operator()(RqParam k, size_t h) const { return params32(prm0, prm1, k, h); }
};

// The parameters of accumulator k of one flat panel (DwWeights::flat_params()).
struct FlatParams {
  const int32_t* prm;
  size_t k;
  __m512i operator()(RqParam p, size_t) const { return load512(prm + (p * 4 + k) * 16); }
};

template <bool kLeft, bool kRight, class Params>
inline __m512i mbqm16(__m512i x, const Params& prm, size_t h) {
  if (kLeft) x = _mm512_sllv_epi32(x, prm(kRqLeftShift, h));
  const __m512i round = _mm512_set1_epi64(int64_t{1} << 30);
  const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, prm(kRqMultiplier, h)), round), 31);
  const __m512i odd_sum = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), prm(kRqMultiplierOdd, h)), round);
  const __m512i y = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_add_epi64(odd_sum, odd_sum));
  if (!kRight) return y;
  const __m512i mag = _mm512_add_epi32(_mm512_abs_epi32(y), prm(kRqHalf, h));
  const __m512i r = _mm512_srlv_epi32(mag, prm(kRqRightShift, h));
  const __m512i zero = _mm512_setzero_si512();
  return _mm512_mask_sub_epi32(r, _mm512_cmplt_epi32_mask(y, zero), zero, r);
}

template <bool kSplit, class Params>
inline __m512i float_form16(__m512i acc, const Params& prm, size_t h) {
  const __m512 x = _mm512_cvtepi32_ps(acc);
  __m512 offset = _mm512_castsi512_ps(prm(kRqOffset, h));
  if (kSplit) {
    const __mmask16 negative = _mm512_cmplt_epi32_mask(acc, _mm512_setzero_si512());
    offset = _mm512_mask_blend_ps(negative, offset, _mm512_castsi512_ps(prm(kRqOffsetNeg, h)));
  }
  const __m512 scale = _mm512_castsi512_ps(prm(kRqScale, h));
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

// 32 int8 outputs from the two accumulator halves. VPACKSSDW works within 128-bit lanes,
// which then hold the int16 values of 8 consecutive outputs; VPMOVSWB is VPACKSSWB's
// saturation.
template <int kRq, class Params>
inline __m256i requantize32(__m512i acc0, __m512i acc1, const Params& prm, const Output32& q) {
  constexpr bool kLeft = (kRq & kRqLeft) != 0, kRight = (kRq & kRqRight) != 0;
  __m512i v16;
  if constexpr ((kRq & kRqFloat) != 0) {
    v16 = _mm512_packs_epi32(float_form16<kRight>(acc0, prm, 0), float_form16<kRight>(acc1, prm, 1));
  } else {
    v16 = _mm512_packs_epi32(mbqm16<kLeft, kRight>(acc0, prm, 0), mbqm16<kLeft, kRight>(acc1, prm, 1));
    v16 = _mm512_adds_epi16(v16, q.zero_point16);
  }
  __m256i v8 = _mm512_cvtsepi16_epi8(v16);
  if (kRq & kRqClamp) v8 = _mm256_min_epi8(_mm256_max_epi8(v8, q.lo), q.hi);
  return v8;
}

// Requantizes and stores both blocks of a pair (block 1 after block 0: on overlap, its
// values overwrite equal ones); the lanes hold channels 0-7, 8-15 of block 0 and of block 1.
template <int kRq, bool kContiguous>
inline void requantize_store32(__m512i acc0, __m512i acc1, const int32_t* prm0, const int32_t* prm1, const Output32& q,
                               int8_t* o0, int8_t* o1) {
  const __m256i v8 = requantize32<kRq>(acc0, acc1, BlockPairParams{prm0, prm1}, q);
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

// The flat schedule (DwWeights' flat panels): a stride-1 output row as one run of
// out_w * oc values, 64 per step whatever the channel count, each tap a load at a fixed
// distance in the input row. The bytes of four taps are interleaved (VPUNPCKL/HBW, then
// VPUNPCKL/HWD) and VPDPBUSD adds their four products to the accumulators: inputs offset
// to unsigned (XOR 0x80, the start values take -128 * sum(w)), the weights as they are;
// the sums wrap like the reference's int32 accumulator. A lone last tap of a group is
// placed by VPSHUFB (its partners' weights are zero). Loads of a step that reach past the
// input row take the zero point there (masked loads); the last step of a row stores only
// the values within it.
template <int kTaps, int kRq, bool kShift>
void run_flat(const Ctx& c, DwRows& rows, int8_t* out) {
  const DwGeometry& g = c.g;
  const DwWeights& w = c.w;
  const size_t taps = kTaps ? kTaps : g.k_h * g.k_w, groups = (taps + 3) / 4, panels = w.flat_panels();
  const ptrdiff_t oc = static_cast<ptrdiff_t>(c.oc);
  const ptrdiff_t row_len = static_cast<ptrdiff_t>(g.in_w) * oc, run_len = static_cast<ptrdiff_t>(g.out_w) * oc;
  const ptrdiff_t lead = g.pad_left * oc;  // the first tap of value f reads input value f - lead
  const ptrdiff_t reach = static_cast<ptrdiff_t>((g.k_w - 1) * g.dilation_w) * oc;
  std::vector<const int8_t*> rp(g.k_h);
  std::vector<size_t> tap_row(taps);
  std::vector<ptrdiff_t> tap_offset(taps);
  for (size_t t = 0; t < taps; ++t) {
    tap_row[t] = t / g.k_w;
    tap_offset[t] = static_cast<ptrdiff_t>(t % g.k_w * g.dilation_w) * oc;
  }
  const __m512i flip = _mm512_set1_epi8(-128);
  const __m512i zero_points = _mm512_set1_epi8(static_cast<char>(w.input_zero_point()));
  // VPSHUFB indices that place byte 4k + i of each 128-bit lane at byte 4i (accumulator k)
  __m512i lone[4];
  for (int k = 0; k < 4; ++k) {
    alignas(64) int8_t idx[64];
    for (int b = 0; b < 64; ++b) idx[b] = static_cast<int8_t>(b % 4 == 0 ? 4 * k + b % 16 / 4 : -128);
    lone[k] = _mm512_load_si512(idx);
  }
  const int32_t* params = w.flat_params();
  const int8_t* weights = w.flat_weights();
  auto step = [&](auto inside, ptrdiff_t x0, size_t q, int8_t* o, ptrdiff_t n) {
    auto tap = [&](size_t t) {
      const int8_t* row = rp[tap_row[t]];
      const ptrdiff_t at = x0 + tap_offset[t];
      if constexpr (decltype(inside)::value) return _mm512_xor_si512(_mm512_loadu_si512(row + at), flip);
      const ptrdiff_t lo = std::clamp<ptrdiff_t>(-at, 0, 64), hi = std::clamp<ptrdiff_t>(row_len - at, 0, 64);
      const __mmask64 keep = lo < hi ? (~__mmask64{0} >> (64 - (hi - lo))) << lo : 0;
      const auto* p = reinterpret_cast<const int8_t*>(reinterpret_cast<uintptr_t>(row) + at);
      return _mm512_xor_si512(_mm512_mask_loadu_epi8(zero_points, keep, p), flip);
    };
    const int32_t* prm = params + q * kRqParams * 64;
    const int8_t* wp = weights + q * groups * 256;
    __m512i acc[4];
    for (int k = 0; k < 4; ++k) acc[k] = load512(prm + (kRqStart * 4 + k) * 16);
    for (size_t gi = 0; gi < groups; ++gi, wp += 256) {
      const size_t t0 = 4 * gi;
      if (t0 + 1 == taps) {
        const __m512i x = tap(t0);
        for (int k = 0; k < 4; ++k)
          acc[k] = _mm512_dpbusd_epi32(acc[k], _mm512_shuffle_epi8(x, lone[k]), load512(wp + 64 * k));
        continue;
      }
      const __m512i zero = _mm512_setzero_si512();
      const __m512i a = tap(t0), b = t0 + 1 < taps ? tap(t0 + 1) : zero;
      const __m512i cc = t0 + 2 < taps ? tap(t0 + 2) : zero, d = t0 + 3 < taps ? tap(t0 + 3) : zero;
      const __m512i ab_lo = _mm512_unpacklo_epi8(a, b), ab_hi = _mm512_unpackhi_epi8(a, b);
      const __m512i cd_lo = _mm512_unpacklo_epi8(cc, d), cd_hi = _mm512_unpackhi_epi8(cc, d);
      acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_unpacklo_epi16(ab_lo, cd_lo), load512(wp));
      acc[1] = _mm512_dpbusd_epi32(acc[1], _mm512_unpackhi_epi16(ab_lo, cd_lo), load512(wp + 64));
      acc[2] = _mm512_dpbusd_epi32(acc[2], _mm512_unpacklo_epi16(ab_hi, cd_hi), load512(wp + 128));
      acc[3] = _mm512_dpbusd_epi32(acc[3], _mm512_unpackhi_epi16(ab_hi, cd_hi), load512(wp + 192));
    }
    constexpr bool kRight = (kRq & kRqRight) != 0;
    __m512i r[4];
    for (int k = 0; k < 4; ++k) {
      const FlatParams fp{prm, static_cast<size_t>(k)};
      if (kShift) acc[k] = _mm512_sllv_epi32(acc[k], fp(kRqLeftShift, 0));
      if constexpr ((kRq & kRqFloat) != 0) {
        r[k] = float_form16<kRight>(acc[k], fp, 0);
      } else {
        r[k] = mbqm16<false, kRight>(acc[k], fp, 0);
      }
    }
    __m512i lo16 = _mm512_packs_epi32(r[0], r[1]), hi16 = _mm512_packs_epi32(r[2], r[3]);
    if constexpr ((kRq & kRqFloat) == 0) {
      lo16 = _mm512_adds_epi16(lo16, c.q.zero_point16);
      hi16 = _mm512_adds_epi16(hi16, c.q.zero_point16);
    }
    __m512i v8 = _mm512_packs_epi16(lo16, hi16);
    if (kRq & kRqClamp) {
      v8 = _mm512_min_epi8(_mm512_max_epi8(v8, _mm512_broadcast_i64x4(c.q.lo)), _mm512_broadcast_i64x4(c.q.hi));
    }
    if (n >= 64) {
      _mm512_storeu_si512(o, v8);
    } else {
      _mm512_mask_storeu_epi8(o, ~__mmask64{0} >> (64 - n), v8);
    }
  };
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      rows.get(b, oy, rp.data());
      int8_t* orow = out + (b * g.out_h + oy) * run_len;
      size_t q = 0;
      for (ptrdiff_t f = 0; f < run_len; f += 64, q = q + 1 == panels ? 0 : q + 1) {
        const ptrdiff_t x0 = f - lead;
        if (x0 >= 0 && x0 + 64 + reach <= row_len) {
          step(std::true_type(), x0, q, orow + f, run_len - f);
        } else {
          step(std::false_type(), x0, q, orow + f, run_len - f);
        }
      }
    }
  }
}

// Whether the flat schedule runs this layer: fewer channels than a block of 16 at a
// horizontal stride of 1 (the planner, edgeinf/engine/plan.py, leaves their channels
// unpadded on this path). Wider layers measured as fast or faster on the blocks.
inline bool takes_flat(const DwWeights& w, const DwGeometry& g) { return w.flat_panels() > 0 && g.stride_w == 1; }

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
  if (takes_flat(w, g)) {
    DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
    const int flags = call_flags(w.avx2_rq_flags()) & ~kRqLeft;  // the flat path shifts by itself
    with_rq_flags(flags, [&](auto rq) {
      const bool nine = g.k_h * g.k_w == 9;
      if (w.flat_left_shifts()) {
        return nine ? run_flat<9, rq(), true>(c, rows, out) : run_flat<0, rq(), true>(c, rows, out);
      }
      return nine ? run_flat<9, rq(), false>(c, rows, out) : run_flat<0, rq(), false>(c, rows, out);
    });
    return;
  }
  if (c.blocks % 2 == 1) return qs8_dwconv2d__avx2(w, g, in, out);
  if (c.blocks > 0) c.panel = pack_panel(c);
  DwRows rows(g, in, static_cast<int8_t>(w.input_zero_point()));
  with_rq_flags(call_flags(w.avx2_rq_flags()), [&](auto flags) { dispatch_pairs<flags()>(c, in, rows, out); });
}

}  // namespace edgeinf::qs8
