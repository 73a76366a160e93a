// AVX2 conv2d as GEMM over int16 rows (gemm.h's GemmRows16).
//
// The input rows that a chunk of output pixels reads are converted once to int16
// (a - zero_point), and the indirection points into them: through GemmRows, each block of
// GEMM rows converts its segments itself, so a 3x3 filter converted every input pixel 9
// times. A padded tap points at a row of int16 zeros (a padding value minus the zero point),
// which adds nothing. 1x1 filters (each pixel is converted once either way) and odd channel
// counts (a pair of K would straddle two taps) take the int8 route, qs8_conv2d__gemm.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

// dst[i] = src[i] - zero_point for i < count.
void widen(const int8_t* src, size_t count, int32_t zero_point, int16_t* dst) {
  const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(zero_point));
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_sub_epi16(v, zp));
  }
  for (; i < count; ++i) dst[i] = static_cast<int16_t>(src[i] - zero_point);
}

ptrdiff_t clamp_row(ptrdiff_t y, size_t rows) { return std::clamp<ptrdiff_t>(y, 0, static_cast<ptrdiff_t>(rows)); }

}  // namespace

void qs8_conv2d_gemm__avx2(const ConvWeights& cw, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const GemmWeights& w = cw.gemm();
  const size_t taps = g.k_h * g.k_w;
  if (taps == 1 || g.in_c % 2 != 0) return qs8_conv2d__gemm(w, g, in, out);
  const size_t pixels = g.batch * g.out_h * g.out_w, row_values = g.in_w * g.in_c;
  const ptrdiff_t in_h = static_cast<ptrdiff_t>(g.in_h), in_w = static_cast<ptrdiff_t>(g.in_w);
  const ptrdiff_t span_h = static_cast<ptrdiff_t>((g.k_h - 1) * g.dilation_h);
  const ptrdiff_t span_w = static_cast<ptrdiff_t>((g.k_w - 1) * g.dilation_w);
  // Offset of each tap from its window's first value.
  std::vector<ptrdiff_t> tap_offset(taps);
  for (size_t ky = 0; ky < g.k_h; ++ky) {
    for (size_t kx = 0; kx < g.k_w; ++kx) {
      tap_offset[ky * g.k_w + kx] = static_cast<ptrdiff_t>((ky * g.dilation_h * g.in_w + kx * g.dilation_w) * g.in_c);
    }
  }
  // Pixels per GEMM call: bounds the indirection to about 256 KB, and the converted rows
  // to about the chunk's share of the input.
  const size_t chunk = std::max<size_t>(60, (32768 / taps) / 60 * 60);
  const int16_t** ptrs = scratch<const int16_t*, 5>(std::min(chunk, pixels) * taps);
  for (size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const size_t count = std::min(chunk, pixels - p0), last = p0 + count - 1;
    // The input rows (counted over batch and height) that the chunk's windows touch.
    const size_t b0 = p0 / (g.out_h * g.out_w), b1 = last / (g.out_h * g.out_w);
    const size_t oy0 = (p0 / g.out_w) % g.out_h, oy1 = (last / g.out_w) % g.out_h;
    const size_t lo = b0 * g.in_h + clamp_row(static_cast<ptrdiff_t>(oy0 * g.stride_h) - g.pad_top, g.in_h);
    const size_t hi =
        b1 * g.in_h + clamp_row(static_cast<ptrdiff_t>(oy1 * g.stride_h) - g.pad_top + span_h + 1, g.in_h);
    const size_t band_values = (hi - lo) * row_values;
    int16_t* band = scratch<int16_t, 4>(band_values + g.in_c);
    widen(in + lo * row_values, band_values, w.input_zero_point(), band);
    const int16_t* zeros = band + band_values;
    std::fill(band + band_values, band + band_values + g.in_c, int16_t{0});

    size_t ox = p0 % g.out_w, oy = oy0, b = b0;
    for (size_t i = 0; i < count; ++i) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
      // Where the window's first value would be in the band (negative in the padding).
      const ptrdiff_t origin = ((static_cast<ptrdiff_t>(b * g.in_h) + iy0 - static_cast<ptrdiff_t>(lo)) * in_w + ix0) *
                               static_cast<ptrdiff_t>(g.in_c);
      const int16_t** row = ptrs + i * taps;
      if (iy0 >= 0 && ix0 >= 0 && iy0 + span_h < in_h && ix0 + span_w < in_w) {
        for (size_t t = 0; t < taps; ++t) row[t] = band + (origin + tap_offset[t]);
      } else {
        for (size_t ky = 0; ky < g.k_h; ++ky) {
          const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
          for (size_t kx = 0; kx < g.k_w; ++kx) {
            const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
            const size_t t = ky * g.k_w + kx;
            row[t] = iy >= 0 && ix >= 0 && iy < in_h && ix < in_w ? band + (origin + tap_offset[t]) : zeros;
          }
        }
      }
      if (++ox == g.out_w) {
        ox = 0;
        if (++oy == g.out_h) {
          oy = 0;
          ++b;
        }
      }
    }
    qs8_gemm16__avx2(w, GemmRows16{ptrs, count, taps, g.in_c}, out + p0 * g.out_c, g.out_c);
  }
}

}  // namespace edgeinf::qs8
