// AVX2 add / mul: 16 values per step in int32 lanes.
#include <immintrin.h>

#include "../qs8_requantize/avx2_inl.h"
#include "binary.h"

namespace edgeinf::qs8 {
namespace {

inline __m256i lanes(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Shifts of the "smaller than one" multipliers are <= 0: a right shift only.
struct Scale {
  __m256i multiplier, left, right;
  Scale(int32_t m, int32_t shift)
      : multiplier(_mm256_set1_epi32(m)),
        left(_mm256_set1_epi32(shift > 0 ? shift : 0)),
        right(_mm256_set1_epi32(shift > 0 ? 0 : -shift)) {}
  __m256i apply(__m256i x) const { return avx2::mbqm(x, multiplier, left, right); }
};

}  // namespace

void qs8_add__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  const __m256i off1 = _mm256_set1_epi32(p.input1_offset), off2 = _mm256_set1_epi32(p.input2_offset);
  const __m128i shift = _mm_cvtsi32_si128(p.left_shift);
  const Scale s1(p.input1_multiplier, p.input1_shift), s2(p.input2_multiplier, p.input2_shift);
  const Scale so(p.output_multiplier, p.output_shift);
  const __m256i zp = _mm256_set1_epi32(p.output_offset);
  const __m256i lo = _mm256_set1_epi32(p.act_min), hi = _mm256_set1_epi32(p.act_max);
  auto eight = [&](size_t i) {
    const __m256i x = _mm256_sll_epi32(_mm256_add_epi32(lanes(a + i), off1), shift);
    const __m256i y = _mm256_sll_epi32(_mm256_add_epi32(lanes(b + i), off2), shift);
    const __m256i sum = _mm256_add_epi32(s1.apply(x), s2.apply(y));
    const __m256i v = _mm256_add_epi32(so.apply(sum), zp);
    return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), avx2::pack16(eight(i), eight(i + 8)));
  }
  for (; i < n; ++i) out[i] = add_one(a[i], b[i], p);
}

void qs8_mul__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  const __m256i off1 = _mm256_set1_epi32(p.input1_offset), off2 = _mm256_set1_epi32(p.input2_offset);
  const Scale so(p.output_multiplier, p.output_shift);
  const __m256i zp = _mm256_set1_epi32(p.output_offset);
  const __m256i lo = _mm256_set1_epi32(p.act_min), hi = _mm256_set1_epi32(p.act_max);
  auto eight = [&](size_t i) {
    const __m256i prod =
        _mm256_mullo_epi32(_mm256_add_epi32(lanes(a + i), off1), _mm256_add_epi32(lanes(b + i), off2));
    const __m256i v = _mm256_add_epi32(so.apply(prod), zp);
    return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), avx2::pack16(eight(i), eight(i + 8)));
  }
  for (; i < n; ++i) out[i] = mul_one(a[i], b[i], p);
}

}  // namespace edgeinf::qs8
