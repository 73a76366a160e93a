// RESIZE_BILINEAR rows on AVX2: 8 channels per step in int32 lanes (resize_bilinear.h);
// channel counts that are not a multiple of 8 end with the scalar formula.
#include <immintrin.h>

#include "resize_bilinear.h"

namespace edgeinf::engine {

namespace {

inline __m256i lanes(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// bilinear_round on 8 lanes: + or - 2^19 by sign, then division by 2^20 truncating toward
// zero (an arithmetic shift after adding 2^20 - 1 to negative values).
inline __m256i round8(__m256i sum) {
  const __m256i positive = _mm256_cmpgt_epi32(sum, _mm256_setzero_si256());
  const __m256i v =
      _mm256_add_epi32(sum, _mm256_blendv_epi8(_mm256_set1_epi32(-(1 << 19)), _mm256_set1_epi32(1 << 19), positive));
  const __m256i bias = _mm256_and_si256(_mm256_srai_epi32(v, 31), _mm256_set1_epi32((1 << 20) - 1));
  return _mm256_srai_epi32(_mm256_add_epi32(v, bias), 20);
}

}  // namespace

void bilinear_row__avx2(const BilinearRow& r, int8_t* out) {
  const int32_t wy = r.wy;
  const size_t channels = r.channels, full = channels / 8 * 8;
  for (size_t ox = 0; ox < r.out_w; ++ox) {
    const int32_t wx = r.wx[ox];
    const int32_t w00 = (1024 - wy) * (1024 - wx), w10 = wy * (1024 - wx), w01 = (1024 - wy) * wx, w11 = wy * wx;
    const __m256i v00 = _mm256_set1_epi32(w00), v10 = _mm256_set1_epi32(w10);
    const __m256i v01 = _mm256_set1_epi32(w01), v11 = _mm256_set1_epi32(w11);
    const int8_t* a0 = r.row0 + static_cast<size_t>(r.x0[ox]) * channels;
    const int8_t* b0 = r.row1 + static_cast<size_t>(r.x0[ox]) * channels;
    const int8_t* a1 = r.row0 + static_cast<size_t>(r.x1[ox]) * channels;
    const int8_t* b1 = r.row1 + static_cast<size_t>(r.x1[ox]) * channels;
    int8_t* o = out + ox * channels;
    for (size_t c = 0; c < full; c += 8) {
      __m256i sum = _mm256_mullo_epi32(lanes(a0 + c), v00);
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(lanes(b0 + c), v10));
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(lanes(a1 + c), v01));
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(lanes(b1 + c), v11));
      // values within int8: the saturating packs keep them
      const __m256i w = _mm256_packs_epi32(round8(sum), _mm256_setzero_si256());
      const __m128i q = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
      // lanes 0-3 are bytes 0-3 of q, lanes 4-7 bytes 8-11
      _mm_storel_epi64(reinterpret_cast<__m128i*>(o + c), _mm_unpacklo_epi32(q, _mm_srli_si128(q, 8)));
    }
    for (size_t c = full; c < channels; ++c) {
      o[c] = bilinear_round(a0[c] * w00 + b0[c] * w10 + a1[c] * w01 + b1[c] * w11);
    }
  }
}

}  // namespace edgeinf::engine
