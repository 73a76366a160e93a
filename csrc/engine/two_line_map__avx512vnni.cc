// The two-line map on AVX-512 (the avx512vnni path's CPUs have F and BW): 64 values per
// step, each 16 in int32 lanes, the upper line's m and b merged in under a compare mask,
// packed back to bytes with saturation (the clamp to [-128, 127]). The AVX2 variant's
// arithmetic, lane for lane, on twice the lanes and without the blends' extra loads; and
// the same map applied to an ADD's sums before they are stored (ADD's linear form).
// GCC 12's AVX-512 intrinsics warn of the undefined pass-through operand they fill in
// themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "two_line_map.h"

namespace edgeinf::engine {

namespace {

// The map over n values, 64 per step: `sixteen(i)` gives values i .. i + 15 in int32 lanes,
// each in [-128, 127]; the last n % 16 by `one(i)`, scalar.
template <class Sixteen, class One>
void map_values(const TwoLineMap& map, size_t n, Sixteen sixteen, One one, int8_t* out) {
  const size_t period = map.period();
  const int32_t *lower_m = map.lower_m(), *lower_b = map.lower_b();
  const int32_t *upper_m = map.upper_m(), *upper_b = map.upper_b();
  const __m512i below_split = _mm512_set1_epi32(map.split() - 1);
  // packs work per 128-bit lane: dword 4L+X holds value group X's dword L; this puts it at 4X+L.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m128i shift = _mm_cvtsi32_si128(map.shift());
  // floor((m * q + b) / 2^shift) of the 16 values from i, whose lines start at index j.
  auto lines = [&](size_t i, size_t j) {
    const __m512i q = sixteen(i);
    const __mmask16 upper = _mm512_cmpgt_epi32_mask(q, below_split);
    const __m512i m = _mm512_mask_loadu_epi32(_mm512_loadu_si512(lower_m + j), upper, upper_m + j);
    const __m512i b = _mm512_mask_loadu_epi32(_mm512_loadu_si512(lower_b + j), upper, upper_b + j);
    return _mm512_sra_epi32(_mm512_add_epi32(_mm512_mullo_epi32(q, m), b), shift);
  };
  // j: index i's place in the lines' period. The arrays hold period + 32 values and j stays
  // a multiple of 32 below the period, so the 64 read from j stay inside them.
  size_t i = 0, j = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a = lines(i, j), b = lines(i + 16, j + 16), c = lines(i + 32, j + 32), d = lines(i + 48, j + 48);
    const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
    _mm512_storeu_si512(out + i, _mm512_permutexvar_epi32(order, bytes));
    j += 64;
    while (j >= period) j -= period;
  }
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtsepi32_epi8(lines(i, j)));
    j += 16;
    if (j >= period) j -= period;
  }
  for (; i < n; ++i) {
    const size_t c = i % map.channels();
    const int32_t q = one(i);
    out[i] = (q < map.split() ? map.lower(c) : map.upper(c)).at(q, map.shift());
  }
}

inline __m512i lanes(const int8_t* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

}  // namespace

void two_line_map__avx512(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels) {
  map_values(
      map, pixels * map.channels(), [&](size_t i) { return lanes(in + i); }, [&](size_t i) { return int32_t{in[i]}; },
      out);
}

void add_two_lines__avx512(const qs8::AddLinear& f, const TwoLineMap& map, const int8_t* x, const int8_t* y,
                           int8_t* out, size_t pixels) {
  const __m512i cx = _mm512_set1_epi32(f.x_coefficient), cy = _mm512_set1_epi32(f.y_coefficient);
  const __m512i bias = _mm512_set1_epi32(f.bias);
  const __m128i shift = _mm_cvtsi32_si128(f.shift);
  const __m512i lo = _mm512_set1_epi32(f.act_min), hi = _mm512_set1_epi32(f.act_max);
  // The ADD's int8 result: its linear form clamped to the activation range (within int8).
  auto sum = [&](size_t i) {
    const __m512i v = _mm512_add_epi32(_mm512_mullo_epi32(lanes(x + i), cx), _mm512_mullo_epi32(lanes(y + i), cy));
    return _mm512_min_epi32(_mm512_max_epi32(_mm512_sra_epi32(_mm512_add_epi32(v, bias), shift), lo), hi);
  };
  auto one = [&](size_t i) {
    const int32_t v = (f.x_coefficient * x[i] + f.y_coefficient * y[i] + f.bias) >> f.shift;
    return std::min(f.act_max, std::max(f.act_min, v));
  };
  map_values(map, pixels * map.channels(), sum, one, out);
}

}  // namespace edgeinf::engine
