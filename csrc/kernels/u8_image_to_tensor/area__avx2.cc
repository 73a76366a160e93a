// AVX2 area resampling primitives; bit-exact with the scalar reference (area.cc,
// scalar.cc): every sum is an exact integer, so only the order of additions differs.
#include <immintrin.h>

#include <algorithm>

#include "image_to_tensor.h"

namespace edgeinf::preprocess {
namespace {

// 16 columns of two rows as int32 sums w0 * a + w1 * b: the bytes zero-extended to int16,
// interleaved (a, b) and multiplied by the weight pair with VPMADDWD (weights <= 2^11 and
// pixels <= 255 are exact int16 operands). lo holds columns 0-3 | 8-11, hi 4-7 | 12-15.
inline void weigh_pair(const uint8_t* a, const uint8_t* b, __m256i weights, __m256i& lo, __m256i& hi) {
  const __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m256i y = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(x, y), weights);
  hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(x, y), weights);
}

inline void add_store(int32_t* p, __m256i v, bool init) {
  if (!init) v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}

}  // namespace

// Rows are taken in pairs (an odd last row pairs with itself at weight 0); 32 columns of
// all the rows are summed in registers, then stored once, in column order.
void u8_accumulate_rows__avx2(const uint8_t* const* rows, const int32_t* w, int count, int n, int32_t* acc, bool init) {
  const int pairs = (count + 1) / 2;
  const uint8_t* first[kAreaRowBatch / 2];
  const uint8_t* second[kAreaRowBatch / 2];
  __m256i weights[kAreaRowBatch / 2];
  for (int p = 0; p < pairs; ++p) {
    const bool two = 2 * p + 1 < count;
    first[p] = rows[2 * p];
    second[p] = two ? rows[2 * p + 1] : rows[2 * p];
    const int32_t w1 = two ? w[2 * p + 1] : 0;
    weights[p] =
        _mm256_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(w[2 * p]) | static_cast<uint32_t>(w1) << 16));
  }
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (int p = 0; p < pairs; ++p) {
      __m256i lo, hi;
      weigh_pair(first[p] + i, second[p] + i, weights[p], lo, hi);
      s0 = _mm256_add_epi32(s0, lo);
      s1 = _mm256_add_epi32(s1, hi);
      weigh_pair(first[p] + i + 16, second[p] + i + 16, weights[p], lo, hi);
      s2 = _mm256_add_epi32(s2, lo);
      s3 = _mm256_add_epi32(s3, hi);
    }
    // s0 = columns 0-3 | 8-11, s1 = 4-7 | 12-15, s2 and s3 the same 16 on
    add_store(acc + i, _mm256_permute2x128_si256(s0, s1, 0x20), init);
    add_store(acc + i + 8, _mm256_permute2x128_si256(s0, s1, 0x31), init);
    add_store(acc + i + 16, _mm256_permute2x128_si256(s2, s3, 0x20), init);
    add_store(acc + i + 24, _mm256_permute2x128_si256(s2, s3, 0x31), init);
  }
  u8_accumulate_rows__scalar(rows, w, count, i, n, acc, init);
}

// One output pixel per step: each tap's eight int32 from its first byte on (every channel
// of the pixel, bpp <= 4) times the tap's weight, summed; the channels are lanes i0[c].
// The products are below 2^31 (see s32_area_reduce__scalar), so VPMULLD is exact; the
// lanes past the pixel read the accumulator's slack (kAccSlack) and are dropped.
void s32_area_reduce__avx2(const HPass& pass, const int32_t* acc, int n, int16_t* out, int plane_stride) {
  const int nch = pass.nch;
  const bool planar = pass.planar;
  const int32_t* start = pass.tap_start.data();
  const int32_t* offset = pass.tap_offset.data();
  const int32_t* weight = pass.tap_weight.data();
  const __m256i half = _mm256_set1_epi32(1 << (kAreaShift - 1));
  alignas(32) int32_t lanes[8];
  for (int x = 0; x < n; ++x) {
    __m256i sum = half;
    for (int32_t k = start[x]; k < start[x + 1]; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + offset[k]));
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(v, _mm256_set1_epi32(weight[k])));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_srai_epi32(sum, kAreaShift));
    for (int c = 0; c < nch; ++c) {
      const int16_t v = static_cast<int16_t>(lanes[pass.i0[c]]);
      if (planar)
        out[c * plane_stride + x] = v;
      else
        out[x * nch + c] = v;
    }
  }
}

}  // namespace edgeinf::preprocess
