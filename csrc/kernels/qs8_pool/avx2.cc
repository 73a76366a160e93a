// AVX2 pooling over 16 channels per step (a channel count past 16 that is not a multiple
// of 16 ends with a block overlapping the one before); fewer than 16 channels and
// oversized average windows take the scalar path for those outputs.
#include <immintrin.h>

#include <algorithm>

#include "../../quant/avx2_inl.h"
#include "pool.h"

namespace edgeinf::qs8 {
namespace {

// Scalar outputs of one pixel for channels [c0, c1): the tail of both kernels.
template <bool kMax>
void pixel_tail(const PoolGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox, size_t c0, size_t c1,
                int8_t* o) {
  size_t y0, y1, x0, x1;
  pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
  pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
  const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
  const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
  const int32_t count = static_cast<int32_t>((y1 - y0) * (x1 - x0));
  for (size_t c = c0; c < c1; ++c) {
    int32_t acc = kMax ? -128 : 0;
    for (size_t fy = y0; fy < y1; ++fy) {
      for (size_t fx = x0; fx < x1; ++fx) {
        const int32_t v = in[((b * g.in_h + static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy))) * g.in_w +
                              static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx))) *
                                 g.channels +
                             c];
        acc = kMax ? std::max(acc, v) : acc + v;
      }
    }
    if (!kMax) acc = average_rounded(acc, count);
    o[c] = static_cast<int8_t>(std::min(std::max(acc, g.act_min), g.act_max));
  }
}

// (sum +- count/2) / count truncated, through float: exact for |sum| < 2^22.
inline __m256i average8(__m256i sum, __m256i half, __m256 count_f) {
  const __m256i negative = _mm256_cmpgt_epi32(_mm256_setzero_si256(), sum);
  // sum > 0: + half; sum <= 0: - half (sum == 0 gives -half / count = 0 either way)
  const __m256i numer = _mm256_add_epi32(sum, _mm256_sub_epi32(_mm256_xor_si256(half, negative), negative));
  return _mm256_cvttps_epi32(_mm256_div_ps(_mm256_cvtepi32_ps(numer), count_f));
}

template <bool kMax>
void pool(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  const size_t C = g.channels, full = C / 16 * 16;
  const __m256i lo = _mm256_set1_epi32(g.act_min), hi = _mm256_set1_epi32(g.act_max);
  const __m128i lo8 = _mm_set1_epi8(static_cast<int8_t>(g.act_min)), hi8 = _mm_set1_epi8(static_cast<int8_t>(g.act_max));
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      size_t y0, y1;
      pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        size_t x0, x1;
        pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * C;
        const size_t count = (y1 - y0) * (x1 - x0);
        size_t simd_end = full;
        if (!kMax && count > kMaxSimdAverageWindow) simd_end = 0;
        // Channels past the last full block: one more block ending at C, overlapping the
        // one before (each channel's result is its own, so the overlap writes equal values).
        const bool overlap_tail = simd_end == full && full < C && C >= 16;
        for (size_t c0 = 0; c0 < simd_end || (overlap_tail && c0 < C); c0 += 16) {
          if (c0 + 16 > C) c0 = C - 16;
          __m128i m = _mm_set1_epi8(-128);
          __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
          for (size_t fy = y0; fy < y1; ++fy) {
            const size_t iy = static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy));
            const int8_t* row = in + ((b * g.in_h + iy) * g.in_w) * C + c0;
            for (size_t fx = x0; fx < x1; ++fx) {
              const size_t ix = static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx));
              const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + ix * C));
              if (kMax) {
                m = _mm_max_epi8(m, v);
              } else {
                s0 = _mm256_add_epi32(s0, _mm256_cvtepi8_epi32(v));
                s1 = _mm256_add_epi32(s1, _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
              }
            }
          }
          __m128i r;
          if (kMax) {
            r = _mm_min_epi8(_mm_max_epi8(m, lo8), hi8);
          } else {
            const __m256i half = _mm256_set1_epi32(static_cast<int32_t>(count / 2));
            const __m256 cf = _mm256_set1_ps(static_cast<float>(count));
            const __m256i a0 = _mm256_min_epi32(_mm256_max_epi32(average8(s0, half, cf), lo), hi);
            const __m256i a1 = _mm256_min_epi32(_mm256_max_epi32(average8(s1, half, cf), lo), hi);
            r = avx2::pack16(a0, a1);
          }
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + c0), r);
        }
        if (simd_end < C && !overlap_tail) pixel_tail<kMax>(g, in, b, oy, ox, simd_end, C, o);
      }
    }
  }
}

}  // namespace

void qs8_maxpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out) { pool<true>(g, in, out); }
void qs8_avgpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out) { pool<false>(g, in, out); }

}  // namespace edgeinf::qs8
