// AVX2 depthwise conv2d: 16 channels per step. (a - zero_point) * w fits int16
// (|a - zp| <= 255, |w| <= 128), so VPMULLW is exact; products widen into int32.
// A depth multiplier above 1 runs the scalar reference.
#include <immintrin.h>

#include <cstring>

#include "../qs8_requantize/avx2_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {

void qs8_dwconv2d__avx2(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using namespace avx2;
  if (g.depth_multiplier != 1) return qs8_dwconv2d__scalar(w, g, in, out);
  const size_t C = g.in_c, CP = w.padded_channels(), full = C / 16 * 16;
  const Requantization& rq = w.requantization();
  const __m256i zp_in = _mm256_set1_epi16(static_cast<int16_t>(w.input_zero_point()));
  const __m256i zp_out = _mm256_set1_epi32(rq.output_zero_point);
  const __m256i lo = _mm256_set1_epi32(rq.act_min), hi = _mm256_set1_epi32(rq.act_max);
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * C;
        for (size_t c0 = 0; c0 < full; c0 += 16) {
          __m256i acc0 = load8_i32(w.bias() + c0), acc1 = load8_i32(w.bias() + c0 + 8);
          for (size_t ky = 0; ky < g.k_h; ++ky) {
            const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
            if (iy < 0 || iy >= static_cast<ptrdiff_t>(g.in_h)) continue;
            for (size_t kx = 0; kx < g.k_w; ++kx) {
              const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
              if (ix < 0 || ix >= static_cast<ptrdiff_t>(g.in_w)) continue;
              const int8_t* px = in + ((b * g.in_h + iy) * g.in_w + ix) * C + c0;
              const __m256i x = _mm256_sub_epi16(
                  _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(px))), zp_in);
              const __m256i f = _mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(w.weights16() + (ky * g.k_w + kx) * CP + c0));
              const __m256i p = _mm256_mullo_epi16(x, f);
              acc0 = _mm256_add_epi32(acc0, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(p)));
              acc1 = _mm256_add_epi32(acc1, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(p, 1)));
            }
          }
          const __m256i v0 = requantize(acc0, load8_i32(rq.multiplier.data() + c0), load8_i32(rq.left_shift.data() + c0),
                                        load8_i32(rq.right_shift.data() + c0), zp_out, lo, hi);
          const __m256i v1 =
              requantize(acc1, load8_i32(rq.multiplier.data() + c0 + 8), load8_i32(rq.left_shift.data() + c0 + 8),
                         load8_i32(rq.right_shift.data() + c0 + 8), zp_out, lo, hi);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + c0), pack16(v0, v1));
        }
        if (full < C) dwconv_pixel_channels(w, g, in, b, oy, ox, full, C, o);
      }
    }
  }
}

}  // namespace edgeinf::qs8
