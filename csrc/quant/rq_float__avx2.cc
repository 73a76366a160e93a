// The AVX2 check of the float form of the requantization (rq_float.h): the kernels' own
// instructions (VCVTDQ2PS, VFMADD, VCVTPS2DQ) against the fixed-point requantization of
// rq_avx2_inl.h, 8 accumulators at a time.
#include <immintrin.h>

#include <algorithm>

#include "avx2_inl.h"
#include "rq_avx2_inl.h"
#include "rq_float.h"

namespace edgeinf::qs8 {
namespace {

bool exact_on(const float_fit::Channel& ch, float scale, float offset, int64_t x0, int64_t x1, int64_t* budget) {
  const __m256i m = _mm256_set1_epi32(ch.multiplier), r = _mm256_set1_epi32(ch.right_shift);
  const __m256i l = _mm256_set1_epi32(ch.left_shift);
  const __m256i half = _mm256_set1_epi32(static_cast<int32_t>((int64_t{1} << ch.right_shift) >> 1));
  const __m256i zp = _mm256_set1_epi32(ch.zero_point), lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
  const __m256 s = _mm256_set1_ps(scale), o = _mm256_set1_ps(offset);
  double dscale[8];
  std::fill(dscale, dscale + 8, ch.scale);
  const __m256i last = _mm256_set1_epi32(static_cast<int32_t>(x1)), eight = _mm256_set1_epi32(8);
  __m256i x = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(x0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t i = x0; i <= x1; i += 8, x = _mm256_add_epi32(x, eight)) {
    *budget -= 8;
    const __m256i xc = _mm256_min_epi32(x, last);
    const __m256i want8 =
        ch.scale > 0
            ? avx2::requantize_double(xc, dscale, zp, lo, hi)
            : _mm256_min_epi32(
                  _mm256_max_epi32(_mm256_add_epi32(avx2_rq::mbqm8<true, true>(xc, m, m, l, r, half), zp), lo), hi);
    const __m256i got = _mm256_cvtps_epi32(_mm256_fmadd_ps(_mm256_cvtepi32_ps(xc), s, o));
    const __m256i got8 = _mm256_min_epi32(_mm256_max_epi32(got, lo), hi);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(want8, got8)) != -1) return false;
  }
  return true;
}

}  // namespace

float_fit::Check float_fit::check__avx2() { return avx2_rq::rounds_to_nearest() ? &exact_on : nullptr; }

}  // namespace edgeinf::qs8
