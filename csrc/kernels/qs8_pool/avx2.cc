// AVX2 pooling over 16 channels per step (a channel count past 16 that is not a multiple
// of 16 ends with a block overlapping the one before); fewer than 16 channels and
// oversized average windows take the scalar path for those outputs.
#include <immintrin.h>

#include "../../quant/avx2_inl.h"
#include "pool.h"
#include "pool_simd_inl.h"

namespace edgeinf::qs8 {
namespace {

// (sum +- count/2) / count truncated, through float: exact for |sum| < 2^22.
inline __m256i average8(__m256i sum, __m256i half, __m256 count_f) {
  const __m256i negative = _mm256_cmpgt_epi32(_mm256_setzero_si256(), sum);
  // sum > 0: + half; sum <= 0: - half (sum == 0 gives -half / count = 0 either way)
  const __m256i numer = _mm256_add_epi32(sum, _mm256_sub_epi32(_mm256_xor_si256(half, negative), negative));
  return _mm256_cvttps_epi32(_mm256_div_ps(_mm256_cvtepi32_ps(numer), count_f));
}

inline __m128i load16(const int8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

struct MaxBlock {
  static constexpr bool kOverlapTail = true;
  explicit MaxBlock(const PoolGeometry& g)
      : lo(_mm_set1_epi8(static_cast<int8_t>(g.act_min))), hi(_mm_set1_epi8(static_cast<int8_t>(g.act_max))) {}
  void start() { m = _mm_set1_epi8(-128); }
  void add(const int8_t* p) { m = _mm_max_epi8(m, load16(p)); }
  void store(int8_t* o, size_t) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_min_epi8(_mm_max_epi8(m, lo), hi));
  }
  __m128i lo, hi, m;
};

struct AverageBlock {
  static constexpr bool kOverlapTail = true;
  explicit AverageBlock(const PoolGeometry& g) : lo(_mm256_set1_epi32(g.act_min)), hi(_mm256_set1_epi32(g.act_max)) {}
  void start() { s0 = s1 = _mm256_setzero_si256(); }
  void add(const int8_t* p) {
    const __m128i v = load16(p);
    s0 = _mm256_add_epi32(s0, _mm256_cvtepi8_epi32(v));
    s1 = _mm256_add_epi32(s1, _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
  }
  void store(int8_t* o, size_t count) const {
    const __m256i half = _mm256_set1_epi32(static_cast<int32_t>(count / 2));
    const __m256 cf = _mm256_set1_ps(static_cast<float>(count));
    const __m256i a0 = _mm256_min_epi32(_mm256_max_epi32(average8(s0, half, cf), lo), hi);
    const __m256i a1 = _mm256_min_epi32(_mm256_max_epi32(average8(s1, half, cf), lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), avx2::pack16(a0, a1));
  }
  __m256i lo, hi, s0, s1;
};

}  // namespace

void qs8_maxpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  pool_simd::pool<true, MaxBlock>(g, in, out);
}
void qs8_avgpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  pool_simd::pool<false, AverageBlock>(g, in, out);
}

}  // namespace edgeinf::qs8
