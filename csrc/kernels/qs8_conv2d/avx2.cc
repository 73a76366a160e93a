// AVX2 direct conv2d for few input channels (conv2d.h): 6 output pixels x 16 output
// channels per tile, two K values per VPMADDWD.
//
// A chunk of output pixels gets its window rows (raw int8, padded taps as the input
// zero point), widened once to int16; a tile broadcasts a pair of K values of each of its
// 6 rows and multiplies it with the packed weight pairs of 16 channels (int16 products of
// int8 values: a pair sum is at most 2 * 128 * 128, exact in int32). Accumulators start
// from bias - zero_point * sum(w), so a padded tap adds zp * w - zp * w = 0 like the
// reference's skipped tap, and the total equals the reference accumulator modulo 2^32.
// Accumulators are in rq_params.h's lane order, requantized by rq_avx2_inl.h.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "conv2d.h"
#include "rq_avx2_inl.h"

namespace edgeinf::qs8 {
namespace {

using namespace avx2_rq;

constexpr size_t kRows = 6;

inline __m256i broadcast_pair(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Rows [0, kRows) of a (row stride kp int16) times one 16-channel block; stores `rows`
// rows of `ncols` channels at out (row stride out_stride).
template <int kRq>
void tile(const int16_t* a, size_t kp, const int16_t* panel, const int32_t* prm, const Output& q, size_t rows,
          size_t ncols, int8_t* out, size_t out_stride) {
  __m256i acc[kRows][2];
  const __m256i s0 = load(prm + kRqStart * 16), s1 = load(prm + kRqStart * 16 + 8);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
  for (size_t k = 0; k < kp; k += 2, panel += 32) {
    const __m256i w0 = load(panel), w1 = load(panel + 16);
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) {
      const __m256i av = broadcast_pair(a + r * kp + k);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, w0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, w1));
    }
  }
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    if (r >= rows) break;
    const __m128i v = requantize16<kRq>(acc[r][0], acc[r][1], prm, q);
    if (ncols == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + r * out_stride), v);
    } else {
      alignas(16) int8_t tmp[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), v);
      std::memcpy(out + r * out_stride, tmp, ncols);
    }
  }
}

// Window rows of pixels [p0, p0 + m) as int16 at dst (row stride kp). A window inside
// the image with rows of at most 16 contiguous values (dilation 1 across) is loaded row by
// row with 16-byte loads (each store's excess is overwritten by the next filter row or
// is the K padding, zeroed after; dst has 16 values of slack); other windows go through
// the portable conv_window_rows.
void window_rows16(const ConvGeometry& g, const int8_t* in, int8_t zp, size_t p0, size_t m, size_t kp, int16_t* dst) {
  const size_t run = g.k_w * g.in_c, k = g.k_h * run;
  const bool fast = g.dilation_w == 1 && run <= 16;
  const int8_t* in_end = in + g.batch * g.in_h * g.in_w * g.in_c;
  const ptrdiff_t row_stride = static_cast<ptrdiff_t>(g.in_w * g.in_c * g.dilation_h);
  const ptrdiff_t span_h = static_cast<ptrdiff_t>((g.k_h - 1) * g.dilation_h), span_w = static_cast<ptrdiff_t>(g.k_w - 1);
  size_t ox = p0 % g.out_w, oy = (p0 / g.out_w) % g.out_h, b = p0 / (g.out_w * g.out_h);
  alignas(16) int8_t tmp[16];
  std::vector<int8_t> slow(kp);
  for (size_t i = 0; i < m; ++i, dst += kp) {
    const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
    const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
    if (fast && iy0 >= 0 && iy0 + span_h < static_cast<ptrdiff_t>(g.in_h) && ix0 >= 0 &&
        ix0 + span_w < static_cast<ptrdiff_t>(g.in_w)) {
      const int8_t* s = in + ((b * g.in_h + static_cast<size_t>(iy0)) * g.in_w + static_cast<size_t>(ix0)) * g.in_c;
      int16_t* d = dst;
      for (size_t ky = 0; ky < g.k_h; ++ky, s += row_stride, d += run) {
        __m128i v;
        if (s + 16 <= in_end) {
          v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        } else {
          std::memcpy(tmp, s, run);
          v = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_cvtepi8_epi16(v));
      }
      for (size_t j = k; j < kp; ++j) dst[j] = 0;
    } else {
      conv_window_rows(g, in, zp, p0 + i, 1, kp, slow.data());
      for (size_t j = 0; j < kp; ++j) dst[j] = slow[j];
    }
    if (++ox == g.out_w) {
      ox = 0;
      if (++oy == g.out_h) {
        oy = 0;
        ++b;
      }
    }
  }
}

template <int kRq>
void run(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t n = g.out_c, kp = w.kp2(), blocks = (n + 15) / 16;
  const size_t pixels = g.batch * g.out_h * g.out_w;
  const size_t chunk = std::min<size_t>(std::max<size_t>(kRows, (16384 / kp) / kRows * kRows),
                                        (pixels + kRows - 1) / kRows * kRows);
  std::vector<int16_t> a16(chunk * kp + 16, 0);
  const Output q(w.gemm().requantization());
  const int8_t zp = static_cast<int8_t>(w.input_zero_point());
  for (size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const size_t m = std::min(chunk, pixels - p0);
    window_rows16(g, in, zp, p0, m, kp, a16.data());
    std::fill(a16.begin() + static_cast<ptrdiff_t>(m * kp), a16.end(), int16_t{0});  // rows past m: computed, not stored
    for (size_t r0 = 0; r0 < m; r0 += kRows) {
      const size_t rows = std::min(kRows, m - r0);
      for (size_t b = 0; b < blocks; ++b) {
        tile<kRq>(a16.data() + r0 * kp, kp, w.avx2_panel() + b * kp * 16, w.avx2_params() + b * kRqParams * 16, q,
                    rows, std::min<size_t>(16, n - b * 16), out + (p0 + r0) * n + b * 16, n);
      }
    }
  }
}

}  // namespace

void qs8_conv2d_direct__avx2(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  with_rq_flags(rq_flags(w.any_left_shift(), w.gemm().requantization()),
                [&](auto flags) { run<flags()>(w, g, in, out); });
}

}  // namespace edgeinf::qs8
