// The VPDPBUSD GEMM on AVX-VNNI (VEX encoding, ymm registers): 6x16 tiles, two ymm
// accumulators per row. Compiled with -mavxvnni for this file only and selected at run
// time only when CPUID reports AVX-VNNI (dispatch.cc); the file holds nothing but the
// micro-kernel (dot_gemm.h).
#include <immintrin.h>

#include "dot_gemm.h"
#include "dot_indirect_tile_inl.h"
#include "dot_tile_inl.h"
#include "dot_ymm_inl.h"

namespace edgeinf::qs8 {
namespace {

inline __m256i avx_vnni_dpbusd(__m256i acc, __m256i a, __m256i w) { return _mm256_dpbusd_avx_epi32(acc, a, w); }

constexpr DotTiles kTiles = dot_tiles<YmmDot<&avx_vnni_dpbusd>, 6, 1>();
constexpr DotIndirectTiles kIndirectTiles = dot_indirect_tiles<YmmDot<&avx_vnni_dpbusd>, 6, 1>();

}  // namespace

void qs8_gemm__avx2vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  qs8_gemm_dot(kTiles, w, a, out, out_stride);
}

void qs8_conv2d_direct__avx2vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_dot(kTiles, w, g, in, out);
}

void qs8_conv2d_indirect__avx2vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_indirect_dot(kIndirectTiles, kIndirectTiles, w, g, in, out);
}

}  // namespace edgeinf::qs8
