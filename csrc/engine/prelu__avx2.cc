// PRELU on AVX2: the reference formula on 8 int32 lanes (prelu.h). Channel counts that
// are not a multiple of 8 take the scalar tables.
#include <immintrin.h>

#include "../quant/avx2_inl.h"
#include "prelu.h"

namespace edgeinf::engine {

namespace {

struct Factor {
  __m256i multiplier, left, right;
  explicit Factor(int32_t m, int32_t shift)
      : multiplier(_mm256_set1_epi32(m)),
        left(_mm256_set1_epi32(shift > 0 ? shift : 0)),
        right(_mm256_set1_epi32(shift > 0 ? 0 : -shift)) {}
  __m256i apply(__m256i x) const { return qs8::avx2::mbqm(x, multiplier, left, right); }
};

}  // namespace

void prelu__avx2(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels) {
  const size_t channels = p.alpha.size();
  if (channels % 8 != 0) return prelu__scalar(p, in, out, pixels);
  const Factor positive(p.positive_multiplier, p.positive_shift), negative(p.negative_multiplier, p.negative_shift);
  const __m256i in_zp = _mm256_set1_epi32(p.input_zero_point), out_zp = _mm256_set1_epi32(p.output_zero_point);
  const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127), zero = _mm256_setzero_si256();
  // 8 values from in + i, whose channels start at c (channels is a multiple of 8).
  auto eight = [&](size_t i, size_t c) {
    const __m256i x =
        _mm256_sub_epi32(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + i))), in_zp);
    const __m256i alpha = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.alpha.data() + c));
    const __m256i v = _mm256_blendv_epi8(positive.apply(x), negative.apply(_mm256_mullo_epi32(x, alpha)),
                                         _mm256_cmpgt_epi32(zero, x));
    return _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(v, out_zp), lo), hi);
  };
  const size_t n = pixels * channels;
  size_t i = 0, c = 0;
  if (channels % 16 == 0) {
    for (; i + 16 <= n; i += 16, c = c + 16 == channels ? 0 : c + 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), qs8::avx2::pack16(eight(i, c), eight(i + 8, c + 8)));
    }
  }
  for (; i + 8 <= n; i += 8, c = c + 8 == channels ? 0 : c + 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), qs8::avx2::pack8(eight(i, c)));
  }
}

}  // namespace edgeinf::engine
