// AVX2 add / mul: 16 values per step in int32 lanes.
#include <immintrin.h>

#include "../../quant/avx2_inl.h"
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

// One input of ADD rescaled to the common scale, when the left shift is 20 (TFLite's for
// int8) and the input shift is <= 0: with v = x + offset (|v| <= 255) and the multiplier
// m = high * 2^11 + low (low < 2^11), the high multiply of v * 2^20 by m, floor((v * m *
// 2^20 + 2^30) / 2^31), equals v * high + floor((v * low + 2^10) / 2^11) exactly, and no
// product leaves int32: two 32-bit multiplies instead of the 64-bit ones of Scale.
struct InputScale {
  __m256i offset, high, low, right;
  InputScale(int32_t input_offset, int32_t m, int32_t shift)
      : offset(_mm256_set1_epi32(input_offset)),
        high(_mm256_set1_epi32(m >> 11)),
        low(_mm256_set1_epi32(m & 2047)),
        right(_mm256_set1_epi32(-shift)) {}
  __m256i apply(__m256i x) const {
    const __m256i v = _mm256_add_epi32(x, offset);
    const __m256i rounded_low =
        _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(v, low), _mm256_set1_epi32(1 << 10)), 11);
    return avx2::rdbpot(_mm256_add_epi32(_mm256_mullo_epi32(v, high), rounded_low), right);
  }
};

bool input_scales_split(const AddParams& p) {
  return p.left_shift == 20 && p.input1_shift <= 0 && p.input2_shift <= 0 && p.input1_multiplier >= 0 &&
         p.input2_multiplier >= 0 && p.input1_offset >= -128 && p.input1_offset <= 128 && p.input2_offset >= -128 &&
         p.input2_offset <= 128;
}

}  // namespace

void qs8_add__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  const __m256i off1 = _mm256_set1_epi32(p.input1_offset), off2 = _mm256_set1_epi32(p.input2_offset);
  const __m128i shift = _mm_cvtsi32_si128(p.left_shift);
  const Scale s1(p.input1_multiplier, p.input1_shift), s2(p.input2_multiplier, p.input2_shift);
  const Scale so(p.output_multiplier, p.output_shift);
  const __m256i zp = _mm256_set1_epi32(p.output_offset);
  const __m256i lo = _mm256_set1_epi32(p.act_min), hi = _mm256_set1_epi32(p.act_max);
  size_t i = 0;
  if (input_scales_split(p)) {
    const InputScale in1(p.input1_offset, p.input1_multiplier, p.input1_shift);
    const InputScale in2(p.input2_offset, p.input2_multiplier, p.input2_shift);
    auto eight = [&](size_t i) {
      const __m256i sum = _mm256_add_epi32(in1.apply(lanes(a + i)), in2.apply(lanes(b + i)));
      const __m256i v = _mm256_add_epi32(so.apply(sum), zp);
      return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
    };
    for (; i + 16 <= n; i += 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), avx2::pack16(eight(i), eight(i + 8)));
    }
  }
  auto eight = [&](size_t i) {
    const __m256i x = _mm256_sll_epi32(_mm256_add_epi32(lanes(a + i), off1), shift);
    const __m256i y = _mm256_sll_epi32(_mm256_add_epi32(lanes(b + i), off2), shift);
    const __m256i sum = _mm256_add_epi32(s1.apply(x), s2.apply(y));
    const __m256i v = _mm256_add_epi32(so.apply(sum), zp);
    return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
  };
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
    const __m256i prod = _mm256_mullo_epi32(_mm256_add_epi32(lanes(a + i), off1), _mm256_add_epi32(lanes(b + i), off2));
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
