// The VPDPBUSD GEMM on AVX-512 VNNI: 8x32 tiles, two zmm accumulators per row (two panels
// of 16 int32 columns), sixteen independent chains. Compiled with -mavx512f -mavx512bw
// -mavx512vnni for this file only and selected at run time only when CPUID reports the features and the OS saves the
// zmm state (dispatch.cc); the file holds nothing but the micro-kernel (dot_gemm.h).
#include <immintrin.h>

#include <cstring>

#include "dot_gemm.h"
#include "dot_tile_inl.h"

namespace edgeinf::qs8 {
namespace {

struct ZmmDot {
  using Acc = __m512i;
  using Panel = __m512i;
  static Acc load(const int32_t* p) { return _mm512_loadu_si512(p); }
  static void store(int32_t* p, Acc v) { _mm512_storeu_si512(p, v); }
  static Acc zero() { return _mm512_setzero_si512(); }
  static Acc add(Acc x, Acc y) { return _mm512_add_epi32(x, y); }
  static Panel load_panel(const int8_t* p) { return _mm512_loadu_si512(p); }
  using Quad = __m512i;
  static Quad broadcast(const uint8_t* quad) {
    int32_t v;
    std::memcpy(&v, quad, sizeof(v));
    return _mm512_set1_epi32(v);
  }
  static Acc dot(Acc acc, Quad a, Panel w) { return _mm512_dpbusd_epi32(acc, a, w); }
};

constexpr DotTiles kTiles = dot_tiles<ZmmDot, 8, 2>();

}  // namespace

void qs8_gemm__avx512vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  qs8_gemm_dot(kTiles, w, a, out, out_stride);
}

}  // namespace edgeinf::qs8
