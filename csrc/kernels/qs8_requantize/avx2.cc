// AVX2 requantization: 16 channels per step; the tail goes through the scalar helper.
#include "../../quant/avx2_inl.h"
#include "requantize.h"

namespace edgeinf::qs8 {

void qs8_requantize__avx2(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq) {
  using namespace avx2;
  const __m256i zp = _mm256_set1_epi32(rq.output_zero_point);
  const __m256i lo = _mm256_set1_epi32(rq.act_min);
  const __m256i hi = _mm256_set1_epi32(rq.act_max);
  for (size_t r = 0; r < rows; ++r) {
    const int32_t* a = acc + r * channels;
    int8_t* o = out + r * channels;
    size_t c = 0;
    for (; c + 16 <= channels; c += 16) {
      const __m256i v0 =
          requantize(load8_i32(a + c), load8_i32(rq.multiplier.data() + c), load8_i32(rq.left_shift.data() + c),
                     load8_i32(rq.right_shift.data() + c), zp, lo, hi);
      const __m256i v1 =
          requantize(load8_i32(a + c + 8), load8_i32(rq.multiplier.data() + c + 8),
                     load8_i32(rq.left_shift.data() + c + 8), load8_i32(rq.right_shift.data() + c + 8), zp, lo, hi);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + c), pack16(v0, v1));
    }
    for (; c < channels; ++c) o[c] = requantize_one(a[c], rq, c);
  }
}

}  // namespace edgeinf::qs8
