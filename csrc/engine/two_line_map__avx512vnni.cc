// The two-line map on AVX-512 (the avx512vnni path's CPUs have F and BW): 64 values per
// step, each 16 in int32 lanes, the upper line's m and b merged in under a compare mask,
// packed back to bytes with saturation (the clamp to [-128, 127]). The AVX2 variant's
// arithmetic, lane for lane, on twice the lanes and without the blends' extra loads.
// GCC 12's AVX-512 intrinsics warn of the undefined pass-through operand they fill in
// themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "two_line_map.h"

namespace edgeinf::engine {

void two_line_map__avx512(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels) {
  const size_t channels = map.channels(), n = pixels * channels, period = map.period();
  const int32_t *lower_m = map.lower_m(), *lower_b = map.lower_b();
  const int32_t *upper_m = map.upper_m(), *upper_b = map.upper_b();
  const __m512i below_split = _mm512_set1_epi32(map.split() - 1);
  // packs work per 128-bit lane: dword 4L+X holds value group X's dword L; this puts it at 4X+L.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i shift = _mm_cvtsi32_si128(map.shift());
  // floor((m * q + b) / 2^shift) of the 16 values at src, whose lines start at index j.
  auto sixteen = [&](const int8_t* src, size_t j) {
    const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
    const __mmask16 upper = _mm512_cmpgt_epi32_mask(q, below_split);
    const __m512i m = _mm512_mask_loadu_epi32(_mm512_loadu_si512(lower_m + j), upper, upper_m + j);
    const __m512i b = _mm512_mask_loadu_epi32(_mm512_loadu_si512(lower_b + j), upper, upper_b + j);
    return _mm512_sra_epi32(_mm512_add_epi32(_mm512_mullo_epi32(q, m), b), shift);
  };
  // j: index i's place in the lines' period. The arrays hold period + 32 values and j stays
  // a multiple of 32 below the period, so the 64 read from j stay inside them.
  size_t i = 0, j = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a = sixteen(in + i, j), b = sixteen(in + i + 16, j + 16);
    const __m512i c = sixteen(in + i + 32, j + 32), d = sixteen(in + i + 48, j + 48);
    const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
    _mm512_storeu_si512(out + i, _mm512_permutexvar_epi32(order, bytes));
    j += 64;
    while (j >= period) j -= period;
  }
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtsepi32_epi8(sixteen(in + i, j)));
    j += 16;
    if (j >= period) j -= period;
  }
  for (; i < n; ++i) {
    const size_t c = i % channels;
    const int32_t q = in[i];
    out[i] = (q < map.split() ? map.lower(c) : map.upper(c)).at(q, map.shift());
  }
}

}  // namespace edgeinf::engine
