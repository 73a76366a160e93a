// AVX2 depthwise conv2d: 16 channels per step, two filter taps per VPMADDWD.
//
// Each output pixel gets a list of tap pointers (a row of zero points for padded taps).
// Raw int8 inputs of two taps are interleaved as int16 and multiplied with interleaved
// weights (a pair sum is at most 2 * 128 * 128, exact in int32); the zero point enters
// as bias - zp * sum(w), so a padded tap adds zp * w - zp * w = 0 like the reference's
// skipped tap, and the total equals the reference accumulator modulo 2^32. A depth
// multiplier above 1 runs the scalar reference.
#include <immintrin.h>

#include <vector>

#include "../qs8_requantize/avx2_inl.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {

void qs8_dwconv2d__avx2(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using namespace avx2;
  if (g.depth_multiplier != 1) return qs8_dwconv2d__scalar(w, g, in, out);
  const size_t C = g.in_c, full = C / 16 * 16, blocks = w.padded_channels() / 16;
  const size_t taps = g.k_h * g.k_w, pairs = (taps + 1) / 2;
  const Requantization& rq = w.requantization();
  const __m256i zp_out = _mm256_set1_epi32(rq.output_zero_point);
  const __m256i lo = _mm256_set1_epi32(rq.act_min), hi = _mm256_set1_epi32(rq.act_max);
  const std::vector<int8_t> padding(C + 16, static_cast<int8_t>(w.input_zero_point()));
  std::vector<const int8_t*> ptrs(2 * pairs, padding.data());
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        for (size_t ky = 0; ky < g.k_h; ++ky) {
          const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
          for (size_t kx = 0; kx < g.k_w; ++kx) {
            const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
            const bool inside =
                iy >= 0 && ix >= 0 && iy < static_cast<ptrdiff_t>(g.in_h) && ix < static_cast<ptrdiff_t>(g.in_w);
            ptrs[ky * g.k_w + kx] = inside ? in + ((b * g.in_h + iy) * g.in_w + ix) * C : padding.data();
          }
        }
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * C;
        for (size_t c0 = 0, block = 0; c0 < full; c0 += 16, ++block) {
          __m256i acc_lo = _mm256_setzero_si256(), acc_hi = _mm256_setzero_si256();
          const int16_t* wp = w.tap_pairs16() + block * 32;
          for (size_t p = 0; p < pairs; ++p, wp += blocks * 32) {
            const __m256i a0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ptrs[2 * p] + c0)));
            const __m256i a1 =
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ptrs[2 * p + 1] + c0)));
            acc_lo = _mm256_add_epi32(acc_lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(a0, a1),
                                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp))));
            acc_hi = _mm256_add_epi32(acc_hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(a0, a1),
                                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + 16))));
          }
          // lanes [0-3 | 8-11] and [4-7 | 12-15] back to channel order
          const int32_t* start = w.bias_minus_zero_point_terms() + c0;
          const __m256i s0 = _mm256_add_epi32(_mm256_permute2x128_si256(acc_lo, acc_hi, 0x20), load8_i32(start));
          const __m256i s1 = _mm256_add_epi32(_mm256_permute2x128_si256(acc_lo, acc_hi, 0x31), load8_i32(start + 8));
          const __m256i v0 = requantize(s0, load8_i32(rq.multiplier.data() + c0), load8_i32(rq.left_shift.data() + c0),
                                        load8_i32(rq.right_shift.data() + c0), zp_out, lo, hi);
          const __m256i v1 =
              requantize(s1, load8_i32(rq.multiplier.data() + c0 + 8), load8_i32(rq.left_shift.data() + c0 + 8),
                         load8_i32(rq.right_shift.data() + c0 + 8), zp_out, lo, hi);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + c0), pack16(v0, v1));
        }
        if (full < C) dwconv_pixel_channels(w, g, in, b, oy, ox, full, C, o);
      }
    }
  }
}

}  // namespace edgeinf::qs8
