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

// rounding_divide_by_pot by a shift common to all lanes, for |x| < 2^30: x + 2^(e-1),
// minus one for a negative x (ties away from zero), shifted right arithmetically. With
// e = 0 the value is returned as is. `round` is 2^(e-1) and `negative` all ones for e > 0
// (both 0 for e = 0).
struct UniformShift {
  __m256i round, negative;
  __m128i count;
  explicit UniformShift(int32_t e)
      : round(_mm256_set1_epi32(e > 0 ? int32_t{1} << (e - 1) : 0)),
        negative(_mm256_set1_epi32(e > 0 ? -1 : 0)),
        count(_mm_cvtsi32_si128(e)) {}
  __m256i apply(__m256i x) const {
    const __m256i corrected = _mm256_add_epi32(x, _mm256_and_si256(_mm256_srai_epi32(x, 31), negative));
    return _mm256_sra_epi32(_mm256_add_epi32(corrected, round), count);
  }
};

// One input of ADD rescaled to the common scale, when the left shift is 20 (TFLite's for
// int8) and the input shift is <= 0: with v = x + offset (|v| <= 255) and the multiplier
// m = high * 2^11 + low (low < 2^11), the high multiply of v * 2^20 by m, floor((v * m *
// 2^20 + 2^30) / 2^31), equals v * high + floor((v * low + 2^10) / 2^11) exactly, and no
// product leaves int32: two 32-bit multiplies instead of the 64-bit ones of Scale. The
// input of the larger scale has m = 2^30 and shift 0 (its factor is exactly 1/2), for
// which that is v * 2^19: a shift (kHalf). Every value stays below 2^28 in magnitude.
template <bool kHalf>
struct InputScale {
  __m256i offset, high, low;
  UniformShift right;
  InputScale(int32_t input_offset, int32_t m, int32_t shift)
      : offset(_mm256_set1_epi32(input_offset)),
        high(_mm256_set1_epi32(m >> 11)),
        low(_mm256_set1_epi32(m & 2047)),
        right(-shift) {}
  __m256i apply(__m256i x) const {
    const __m256i v = _mm256_add_epi32(x, offset);
    if (kHalf) return _mm256_slli_epi32(v, 19);
    const __m256i rounded_low =
        _mm256_srai_epi32(_mm256_add_epi32(_mm256_mullo_epi32(v, low), _mm256_set1_epi32(1 << 10)), 11);
    return right.apply(_mm256_add_epi32(_mm256_mullo_epi32(v, high), rounded_low));
  }
};

bool input_scales_split(const AddParams& p) {
  return p.left_shift == 20 && p.input1_shift <= 0 && p.input2_shift <= 0 && p.input1_multiplier >= 0 &&
         p.input2_multiplier >= 0 && p.input1_offset >= -128 && p.input1_offset <= 128 && p.input2_offset >= -128 &&
         p.input2_offset <= 128 && p.output_shift <= 0 && p.output_multiplier >= 0;
}

// The split path over [0, n) in steps of 16; returns where it stopped. The output's high
// multiply takes sums below 2^29 in magnitude, so its rounding shift is UniformShift's.
template <bool kHalf1, bool kHalf2>
size_t add_split(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  const InputScale<kHalf1> in1(p.input1_offset, p.input1_multiplier, p.input1_shift);
  const InputScale<kHalf2> in2(p.input2_offset, p.input2_multiplier, p.input2_shift);
  const __m256i om = _mm256_set1_epi32(p.output_multiplier);
  const UniformShift out_shift(-p.output_shift);
  const __m256i zp = _mm256_set1_epi32(p.output_offset);
  const __m256i lo = _mm256_set1_epi32(p.act_min), hi = _mm256_set1_epi32(p.act_max);
  auto eight = [&](size_t i) {
    const __m256i sum = _mm256_add_epi32(in1.apply(lanes(a + i)), in2.apply(lanes(b + i)));
    const __m256i v = _mm256_add_epi32(out_shift.apply(avx2::srdhm_nonneg(sum, om)), zp);
    return _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
  };
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), avx2::pack16(eight(i), eight(i + 8)));
  }
  return i;
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
    constexpr int32_t kHalf = int32_t{1} << 30;
    const bool half1 = p.input1_multiplier == kHalf && p.input1_shift == 0;
    const bool half2 = p.input2_multiplier == kHalf && p.input2_shift == 0;
    if (half1 && !half2) {
      i = add_split<true, false>(a, b, out, n, p);
    } else if (half2 && !half1) {
      i = add_split<false, true>(a, b, out, n, p);
    } else {
      i = add_split<false, false>(a, b, out, n, p);
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

namespace {

// 32 values per step. Each input pair (a, b) is one int32 lane of two int16 halves, so one
// VPMADDWD forms cx * a + cy * b for 8 values: for the int16 form (binary.h) with the int16
// coefficients, plus the bias and the shift divided by 2^int16_step; for the int32 form
// twice, with the coefficients' signed low halves and their high ones shifted by 16 (the sum
// wraps modulo 2^32 like the value, which is within int32). Then saturating packs (within
// int8 they change nothing the clamp would not) and the clamp on bytes.
template <bool kInt16>
void add_linear(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  const SplitCoefficients c(f);
  const __m256i low = _mm256_set1_epi32(kInt16 ? int16_pair(f.x_int16(), f.y_int16()) : int16_pair(c.x_low, c.y_low));
  const __m256i high = _mm256_set1_epi32(int16_pair(c.x_high, c.y_high));
  const __m256i bias = _mm256_set1_epi32(kInt16 ? f.bias >> f.int16_step : f.bias);
  const __m128i shift = _mm_cvtsi32_si128(kInt16 ? f.shift - f.int16_step : f.shift);
  const __m256i lo = _mm256_set1_epi8(static_cast<int8_t>(f.act_min));
  const __m256i hi = _mm256_set1_epi8(static_cast<int8_t>(f.act_max));
  // packs_epi32 then packs_epi16 leave, per 128-bit half, 4-byte groups of values
  // 0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31: this puts them back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  // floor((cx * a + cy * b + bias) / 2^shift) of 8 values from their (a, b) int16 pairs
  auto eight = [&](__m256i pairs) {
    __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(pairs, low), bias);
    if (!kInt16) sum = _mm256_add_epi32(sum, _mm256_slli_epi32(_mm256_madd_epi16(pairs, high), 16));
    return _mm256_sra_epi32(sum, shift);
  };
  // values i .. i + 15 as two vectors of 8
  auto sixteen = [&](size_t i, __m256i& first, __m256i& second) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    first = eight(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x, y)));
    second = eight(_mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x, y)));
  };
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v0, v1, v2, v3;
    sixteen(i, v0, v1);
    sixteen(i + 16, v2, v3);
    const __m256i w0 = _mm256_packs_epi32(v0, v1), w1 = _mm256_packs_epi32(v2, v3);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w0, w1), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_min_epi8(_mm256_max_epi8(bytes, lo), hi));
  }
  for (; i < n; ++i) {
    const int32_t v = (f.x_coefficient * a[i] + f.y_coefficient * b[i] + f.bias) >> f.shift;
    out[i] = static_cast<int8_t>(std::min(f.act_max, std::max(f.act_min, v)));
  }
}

}  // namespace

void qs8_add_linear__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  if (f.is_int16()) return add_linear<true>(a, b, out, n, f);
  add_linear<false>(a, b, out, n, f);
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
