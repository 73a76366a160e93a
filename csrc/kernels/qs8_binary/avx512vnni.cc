// ADD's linear form (binary.h) on AVX-512 (the avx512vnni path's CPUs have F, BW and VNNI):
// the AVX2 variant's arithmetic, lane for lane, 64 values per step in four 16-lane vectors.
// GCC 12's AVX-512 intrinsics warn of the undefined pass-through operand they fill in
// themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "binary.h"

namespace edgeinf::qs8 {

namespace {

// 64 values per step, the AVX2 variant's arithmetic on 16 lanes, the bias the start of
// VPDPWSSD's sum (the int32 form's low halves' products added to it).
template <bool kInt16>
void add_linear(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  const SplitCoefficients c(f);
  const __m512i low = _mm512_set1_epi32(kInt16 ? int16_pair(f.x_int16(), f.y_int16()) : int16_pair(c.x_low, c.y_low));
  const __m512i high = _mm512_set1_epi32(int16_pair(c.x_high, c.y_high));
  const __m512i bias = _mm512_set1_epi32(kInt16 ? f.bias >> f.int16_step : f.bias);
  const __m128i shift = _mm_cvtsi32_si128(kInt16 ? f.shift - f.int16_step : f.shift);
  const __m512i lo = _mm512_set1_epi8(static_cast<int8_t>(f.act_min));
  const __m512i hi = _mm512_set1_epi8(static_cast<int8_t>(f.act_max));
  // 32 (a, b) pairs unpacked per 128-bit lane hold values 0-7 and 16-23 in one vector, 8-15
  // and 24-31 in the other; after the packs, dword 4L+X holds value group X's dword L: this
  // puts every 4 values back in order.
  const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15);
  auto sixteen = [&](__m256i bytes) {
    const __m512i pairs = _mm512_cvtepi8_epi16(bytes);
    __m512i sum = _mm512_dpwssd_epi32(bias, pairs, low);
    if (!kInt16) sum = _mm512_add_epi32(sum, _mm512_slli_epi32(_mm512_madd_epi16(pairs, high), 16));
    return _mm512_sra_epi32(sum, shift);
  };
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i + 32));
    const __m256i y1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i + 32));
    const __m512i w0 = _mm512_packs_epi32(sixteen(_mm256_unpacklo_epi8(x0, y0)), sixteen(_mm256_unpackhi_epi8(x0, y0)));
    const __m512i w1 = _mm512_packs_epi32(sixteen(_mm256_unpacklo_epi8(x1, y1)), sixteen(_mm256_unpackhi_epi8(x1, y1)));
    const __m512i bytes = _mm512_permutexvar_epi32(order, _mm512_packs_epi16(w0, w1));
    _mm512_storeu_si512(out + i, _mm512_min_epi8(_mm512_max_epi8(bytes, lo), hi));
  }
  for (; i < n; ++i) {
    const int32_t v = (f.x_coefficient * a[i] + f.y_coefficient * b[i] + f.bias) >> f.shift;
    out[i] = static_cast<int8_t>(std::min(f.act_max, std::max(f.act_min, v)));
  }
}

}  // namespace

void qs8_add_linear__avx512(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  if (f.is_int16()) return add_linear<true>(a, b, out, n, f);
  add_linear<false>(a, b, out, n, f);
}

}  // namespace edgeinf::qs8
