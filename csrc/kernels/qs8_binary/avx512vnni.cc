// ADD's linear form (binary.h) on AVX-512 (the avx512vnni path's CPUs have F and BW): the
// AVX2 variant's arithmetic, lane for lane, 64 values per step in four 16-lane vectors.
// GCC 12's AVX-512 intrinsics warn of the undefined pass-through operand they fill in
// themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "binary.h"

namespace edgeinf::qs8 {

void qs8_add_linear__avx512(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  const __m512i cx = _mm512_set1_epi32(f.x_coefficient), cy = _mm512_set1_epi32(f.y_coefficient);
  const __m512i bias = _mm512_set1_epi32(f.bias);
  const __m128i shift = _mm_cvtsi32_si128(f.shift);
  const __m512i lo = _mm512_set1_epi8(static_cast<int8_t>(f.act_min));
  const __m512i hi = _mm512_set1_epi8(static_cast<int8_t>(f.act_max));
  // The packs work per 128-bit lane: dword 4L+X holds vector X's dword L; this puts it at 4X+L.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  auto lanes = [](const int8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  };
  auto sixteen = [&](size_t i) {
    const __m512i sum = _mm512_add_epi32(_mm512_mullo_epi32(lanes(a + i), cx), _mm512_mullo_epi32(lanes(b + i), cy));
    return _mm512_sra_epi32(_mm512_add_epi32(sum, bias), shift);
  };
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i w0 = _mm512_packs_epi32(sixteen(i), sixteen(i + 16));
    const __m512i w1 = _mm512_packs_epi32(sixteen(i + 32), sixteen(i + 48));
    const __m512i bytes = _mm512_permutexvar_epi32(order, _mm512_packs_epi16(w0, w1));
    _mm512_storeu_si512(out + i, _mm512_min_epi8(_mm512_max_epi8(bytes, lo), hi));
  }
  for (; i < n; ++i) {
    const int32_t v = (f.x_coefficient * a[i] + f.y_coefficient * b[i] + f.bias) >> f.shift;
    out[i] = static_cast<int8_t>(std::min(f.act_max, std::max(f.act_min, v)));
  }
}

}  // namespace edgeinf::qs8
