// RESIZE_BILINEAR rows on AVX-512 (the avx512vnni path's CPUs have F and BW): 16 channels
// per step in int32 lanes, the AVX2 variant's arithmetic (resize_bilinear.h) lane for lane;
// the last channels of a pixel by masked loads and stores, so no scalar tail.
// GCC 12's AVX-512 intrinsics warn of the undefined pass-through operand they fill in
// themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "resize_bilinear.h"

namespace edgeinf::engine {

namespace {

inline __m512i lanes(const int8_t* p, __mmask64 mask) {
  return _mm512_cvtepi8_epi32(_mm512_castsi512_si128(_mm512_maskz_loadu_epi8(mask, p)));
}

// bilinear_round on 16 lanes: + or - 2^19 by sign, then division by 2^20 truncating toward
// zero (an arithmetic shift after adding 2^20 - 1 to negative values).
inline __m512i round16(__m512i sum) {
  const __mmask16 positive = _mm512_cmpgt_epi32_mask(sum, _mm512_setzero_si512());
  const __m512i v = _mm512_add_epi32(
      sum, _mm512_mask_blend_epi32(positive, _mm512_set1_epi32(-(1 << 19)), _mm512_set1_epi32(1 << 19)));
  const __mmask16 negative = _mm512_cmplt_epi32_mask(v, _mm512_setzero_si512());
  return _mm512_srai_epi32(_mm512_mask_add_epi32(v, negative, v, _mm512_set1_epi32((1 << 20) - 1)), 20);
}

}  // namespace

void bilinear_row__avx512(const BilinearRow& r, int8_t* out) {
  const int32_t wy = r.wy;
  const size_t channels = r.channels;
  for (size_t ox = 0; ox < r.out_w; ++ox) {
    const int32_t wx = r.wx[ox];
    const int32_t w00 = (1024 - wy) * (1024 - wx), w10 = wy * (1024 - wx), w01 = (1024 - wy) * wx, w11 = wy * wx;
    const __m512i v00 = _mm512_set1_epi32(w00), v10 = _mm512_set1_epi32(w10);
    const __m512i v01 = _mm512_set1_epi32(w01), v11 = _mm512_set1_epi32(w11);
    const int8_t* a0 = r.row0 + static_cast<size_t>(r.x0[ox]) * channels;
    const int8_t* b0 = r.row1 + static_cast<size_t>(r.x0[ox]) * channels;
    const int8_t* a1 = r.row0 + static_cast<size_t>(r.x1[ox]) * channels;
    const int8_t* b1 = r.row1 + static_cast<size_t>(r.x1[ox]) * channels;
    int8_t* o = out + ox * channels;
    for (size_t c = 0; c < channels; c += 16) {
      const size_t left = channels - c;
      const __mmask16 mask = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      __m512i sum = _mm512_mullo_epi32(lanes(a0 + c, mask), v00);
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(lanes(b0 + c, mask), v10));
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(lanes(a1 + c, mask), v01));
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(lanes(b1 + c, mask), v11));
      _mm512_mask_cvtepi32_storeu_epi8(o + c, mask, round16(sum));  // values within int8
    }
  }
}

}  // namespace edgeinf::engine
