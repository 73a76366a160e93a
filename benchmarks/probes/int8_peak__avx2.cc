// The int8 multiply-add peak of an AVX2 core: six independent VPMADDUBSW + VPMADDWD
// chains, few enough registers that nothing spills to the stack.
#include <immintrin.h>

#include "probes.h"

namespace edgeinf::bench_probes {

uint64_t int8_peak__avx2(size_t iterations) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a = _mm256_set1_epi8(3), b0 = _mm256_set1_epi8(1), b1 = _mm256_set1_epi8(2);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  for (size_t i = 0; i < iterations; ++i) {
    // Opaque to the compiler, so the products are not hoisted out of the loop.
    __asm__ volatile("" : "+x"(a), "+x"(b0), "+x"(b1));
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones));
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones));
    c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(_mm256_maddubs_epi16(b0, a), ones));
    c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(_mm256_maddubs_epi16(b1, a), ones));
    c4 = _mm256_add_epi32(c4, _mm256_madd_epi16(_mm256_maddubs_epi16(b0, b1), ones));
    c5 = _mm256_add_epi32(c5, _mm256_madd_epi16(_mm256_maddubs_epi16(b1, b0), ones));
  }
  const __m256i sum =
      _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)), _mm256_add_epi32(c4, c5));
  __asm__ volatile("" : : "x"(sum));
  return static_cast<uint64_t>(iterations) * 6 * 64;  // 32 multiply-adds per VPMADDUBSW
}

}  // namespace edgeinf::bench_probes
