// The narrow 1x1 convolution on AVX2: groups of 8 pixels, each channel's dot products with
// one pixel per lane. The group's inputs are widened to int16 once into a small buffer;
// per channel and block of 16 K values, one VPMADDWD per pixel against the channel's
// weights gives 8 pair sums, and a tree of horizontal adds turns the 8 pixels' vectors
// into one vector of their 8 sums, requantized with the channel's parameters broadcast.
#include <immintrin.h>

#include <algorithm>

#include "../quant/avx2_inl.h"
#include "narrow_pointwise.h"

namespace edgeinf::engine {

namespace {

constexpr size_t kPixels = 8;

inline __m256i load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// [sum of v0, sum of v1, ..., sum of v7]: the lanes of each vector added.
inline __m256i sums_of(const __m256i v[kPixels]) {
  const __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
  const __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
  // Per 128-bit half: u0 = [v0 v1 v2 v3] partial sums of that half, u1 the same of v4..v7.
  const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

}  // namespace

void narrow_pointwise__avx2(const NarrowPointwise& nw, const int8_t* in, size_t in_stride, size_t pixels, int8_t* out) {
  const qs8::GemmWeights& w = nw.weights();
  const qs8::Requantization& rq = w.requantization();
  const size_t n = w.n(), blocks = nw.blocks();
  const int16_t* panel = nw.panel();
  const int32_t* start = w.bias_minus_zero_point_terms();
  const __m256i zp = _mm256_set1_epi32(rq.output_zero_point);
  const __m256i lo = _mm256_set1_epi32(rq.act_min), hi = _mm256_set1_epi32(rq.act_max);
  // The group's inputs as int16: [pixel][block][16] (the scratch slot is this file's own).
  int16_t* a = qs8::scratch<int16_t, 6>(kPixels * blocks * 16);
  alignas(16) int8_t result[NarrowPointwise::kMaxChannels][kPixels];
  for (size_t p0 = 0; p0 < pixels; p0 += kPixels) {
    const size_t count = std::min(kPixels, pixels - p0);
    for (size_t j = 0; j < kPixels; ++j) {
      // A short group repeats its last pixel; those lanes are not stored.
      const int8_t* src = in + (p0 + std::min(j, count - 1)) * in_stride;
      for (size_t b = 0; b < blocks; ++b) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + nw.block_start(b)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + (j * blocks + b) * 16), _mm256_cvtepi8_epi16(v));
      }
    }
    for (size_t c = 0; c < n; ++c) {
      __m256i acc[kPixels];
      const int16_t* wc = panel + c * blocks * 16;
      const __m256i w0 = load(wc);
#pragma GCC unroll 8
      for (size_t j = 0; j < kPixels; ++j) acc[j] = _mm256_madd_epi16(load(a + j * blocks * 16), w0);
      for (size_t b = 1; b < blocks; ++b) {
        const __m256i wb = load(wc + b * 16);
#pragma GCC unroll 8
        for (size_t j = 0; j < kPixels; ++j) {
          acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(load(a + (j * blocks + b) * 16), wb));
        }
      }
      const __m256i sums = _mm256_add_epi32(sums_of(acc), _mm256_set1_epi32(start[c]));
      const __m256i q =
          qs8::avx2::requantize(sums, _mm256_set1_epi32(rq.multiplier[c]), _mm256_set1_epi32(rq.left_shift[c]),
                                _mm256_set1_epi32(rq.right_shift[c]), zp, lo, hi);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(result[c]), qs8::avx2::pack8(q));
    }
    int8_t* dst = out + p0 * n;
    for (size_t j = 0; j < count; ++j) {
      for (size_t c = 0; c < n; ++c) dst[j * n + c] = result[c][j];
    }
  }
}

}  // namespace edgeinf::engine
