// The int8 multiply-add peak of an AVX-512 VNNI core: twelve independent VPDPBUSD zmm
// chains (enough to cover the instruction's latency at full throughput), operands in
// registers.
#include <immintrin.h>

#include "probes.h"

namespace edgeinf::bench_probes {

uint64_t int8_peak__avx512vnni(size_t iterations) {
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(1);
  // Distinct starts: equal chains would be merged into one by the compiler.
  __m512i c0 = _mm512_set1_epi32(0), c1 = _mm512_set1_epi32(1), c2 = _mm512_set1_epi32(2);
  __m512i c3 = _mm512_set1_epi32(3), c4 = _mm512_set1_epi32(4), c5 = _mm512_set1_epi32(5);
  __m512i c6 = _mm512_set1_epi32(6), c7 = _mm512_set1_epi32(7), c8 = _mm512_set1_epi32(8);
  __m512i c9 = _mm512_set1_epi32(9), c10 = _mm512_set1_epi32(10), c11 = _mm512_set1_epi32(11);
  for (size_t i = 0; i < iterations; ++i) {
    // Opaque to the compiler, so the products are not hoisted out of the loop.
    __asm__ volatile("" : "+v"(a), "+v"(b));
    c0 = _mm512_dpbusd_epi32(c0, a, b), c1 = _mm512_dpbusd_epi32(c1, a, b);
    c2 = _mm512_dpbusd_epi32(c2, a, b), c3 = _mm512_dpbusd_epi32(c3, a, b);
    c4 = _mm512_dpbusd_epi32(c4, a, b), c5 = _mm512_dpbusd_epi32(c5, a, b);
    c6 = _mm512_dpbusd_epi32(c6, a, b), c7 = _mm512_dpbusd_epi32(c7, a, b);
    c8 = _mm512_dpbusd_epi32(c8, a, b), c9 = _mm512_dpbusd_epi32(c9, a, b);
    c10 = _mm512_dpbusd_epi32(c10, a, b), c11 = _mm512_dpbusd_epi32(c11, a, b);
  }
  const __m512i sum =
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                        _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
                       _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
  __asm__ volatile("" : : "v"(sum));
  return static_cast<uint64_t>(iterations) * 12 * 128;  // 64 multiply-adds per VPDPBUSD zmm
}

}  // namespace edgeinf::bench_probes
