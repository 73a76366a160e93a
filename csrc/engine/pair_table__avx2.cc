// Pair-table lookups on AVX2: 32 values per step, the table read by four 8-lane gathers of
// 4 bytes (the entry in the low byte), the low bytes packed back in order.
#include <immintrin.h>

#include "pair_table.h"

namespace edgeinf::engine {

namespace {

// The entries of 8 (x, y) pairs: the indices y | x << 8 widened to 32 bits.
inline __m256i gather8(const int* table, __m128i pairs) {
  return _mm256_i32gather_epi32(table, _mm256_cvtepu16_epi32(pairs), 1);
}

}  // namespace

void pair_lookup__avx2(const PairTable& table, const int8_t* x, const int8_t* y, int8_t* out, size_t n) {
  const int* t = reinterpret_cast<const int*>(table.data());
  const __m256i low_byte = _mm256_set1_epi32(0xff);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i vx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i vy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + i));
    // Per 128-bit lane: pairs 0-7 and 8-15 of the lane's 16 values.
    const __m256i lo = _mm256_unpacklo_epi8(vy, vx), hi = _mm256_unpackhi_epi8(vy, vx);
    // Values 0-7, 8-15 (lane 0) and 16-23, 24-31 (lane 1).
    const __m256i a = _mm256_and_si256(gather8(t, _mm256_castsi256_si128(lo)), low_byte);
    const __m256i b = _mm256_and_si256(gather8(t, _mm256_castsi256_si128(hi)), low_byte);
    const __m256i c = _mm256_and_si256(gather8(t, _mm256_extracti128_si256(lo, 1)), low_byte);
    const __m256i d = _mm256_and_si256(gather8(t, _mm256_extracti128_si256(hi, 1)), low_byte);
    // packus per lane: [a0-3 b0-3 | a4-7 b4-7], then bytes [a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7
    // c4-7 d4-7]; the dword permutation puts them in order.
    const __m256i bytes = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_permutevar8x32_epi32(bytes, order));
  }
  pair_lookup__scalar(table, x + i, y + i, out + i, n - i);
}

}  // namespace edgeinf::engine
