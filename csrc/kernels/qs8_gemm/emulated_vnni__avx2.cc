// The VPDPBUSD GEMM with the instruction emulated exactly by AVX2: a test path
// (Isa::kAvx2EmulatedVnni) that runs everything of the AVX-VNNI and AVX-512 VNNI paths
// but the one instruction on CPUs without it.
//
// Each int32 lane gets a0*w0 + a1*w1 + a2*w2 + a3*w3 (a unsigned, w signed bytes): the
// even and the odd bytes widened to int16 and multiplied by VPMADDWD give the two pair
// sums, at most 2 * 255 * 128 each, so nothing saturates, as in VPDPBUSD.
#include <immintrin.h>

#include "dot_gemm.h"
#include "dot_indirect_tile_inl.h"
#include "dot_tile_inl.h"
#include "dot_ymm_inl.h"

namespace edgeinf::qs8 {
namespace {

inline __m256i emulated_dpbusd(__m256i acc, __m256i a, __m256i w) {
  const __m256i a_even = _mm256_and_si256(a, _mm256_set1_epi16(0x00FF)), a_odd = _mm256_srli_epi16(a, 8);
  const __m256i w_even = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8), w_odd = _mm256_srai_epi16(w, 8);
  const __m256i even = _mm256_madd_epi16(a_even, w_even), odd = _mm256_madd_epi16(a_odd, w_odd);
  return _mm256_add_epi32(acc, _mm256_add_epi32(even, odd));
}

constexpr DotTiles kTiles = dot_tiles<YmmDot<&emulated_dpbusd>, 6, 1>();
constexpr DotIndirectTiles kIndirectTiles = dot_indirect_tiles<YmmDot<&emulated_dpbusd>, 6, 1>();

}  // namespace

void qs8_gemm__avx2_emulated_vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  qs8_gemm_dot(kTiles, w, a, out, out_stride);
}

void qs8_conv2d_direct__avx2_emulated_vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_dot(kTiles, w, g, in, out);
}

void qs8_conv2d_indirect__avx2_emulated_vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in,
                                             int8_t* out) {
  qs8_conv2d_indirect_dot(kIndirectTiles, kIndirectTiles, w, g, in, out);
}

}  // namespace edgeinf::qs8
