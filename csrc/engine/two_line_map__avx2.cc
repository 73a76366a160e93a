// The two-line map on AVX2: 32 values per step, each 8 in int32 lanes (the lines of their
// channels loaded from the map's repeated arrays, the lower or upper one picked per lane),
// packed back to bytes with saturation, which is the clamp to [-128, 127].
#include <immintrin.h>

#include "two_line_map.h"

namespace edgeinf::engine {

namespace {

inline __m256i load8(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

}  // namespace

void two_line_map__avx2(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels) {
  const size_t channels = map.channels(), n = pixels * channels, period = map.period();
  const int32_t *lower_m = map.lower_m(), *lower_b = map.lower_b();
  const int32_t *upper_m = map.upper_m(), *upper_b = map.upper_b();
  const __m256i below_split = _mm256_set1_epi32(map.split() - 1);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m128i shift = _mm_cvtsi32_si128(map.shift());
  // floor((m * q + b) / 2^shift) of the 8 values at src, whose lines start at index j.
  auto eight = [&](const int8_t* src, size_t j) {
    const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src)));
    const __m256i upper = _mm256_cmpgt_epi32(q, below_split);
    const __m256i m = _mm256_blendv_epi8(load8(lower_m + j), load8(upper_m + j), upper);
    const __m256i b = _mm256_blendv_epi8(load8(lower_b + j), load8(upper_b + j), upper);
    return _mm256_sra_epi32(_mm256_add_epi32(_mm256_mullo_epi32(q, m), b), shift);
  };
  size_t i = 0, j = 0;  // j: index i's place in the lines' period
  for (; i + 32 <= n; i += 32) {
    const __m256i a = eight(in + i, j), b = eight(in + i + 8, j + 8);
    const __m256i c = eight(in + i + 16, j + 16), d = eight(in + i + 24, j + 24);
    // Per 128-bit lane: a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7; the dword order fixes it.
    const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(bytes, order));
    j += 32;
    if (j >= period) j -= period;
  }
  for (; i < n; ++i) {
    const size_t c = i % channels;
    const int32_t q = in[i];
    out[i] = (q < map.split() ? map.lower(c) : map.upper(c)).at(q, map.shift());
  }
}

}  // namespace edgeinf::engine
