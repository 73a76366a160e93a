// The VPDPBUSD GEMM on AVX-512 VNNI: 8x32 tiles, two zmm accumulators per row (two panels
// of 16 int32 columns), sixteen independent chains, requantizing on zmm where the float
// form applies.
// Compiled with -mavx512f -mavx512bw -mavx512vnni for this file only and selected at run
// time only when CPUID reports the features and the OS saves the zmm state (dispatch.cc);
// the file holds nothing but the micro-kernel (dot_gemm.h).
#include <immintrin.h>

// GCC 12 warns of the undefined pass-through operand inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

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

  // The float-form epilogue (DotOutput) of one panel, 16 columns per instruction: clamped
  // in int32 and narrowed with saturation by a masked VPMOVSDB store, which equals the AVX2
  // epilogue's saturating packs followed by the clamp.
  static constexpr bool kRequantizes = true;
  struct Requantizer {
    __m512 scale, offset, offset_neg;
    __m512i lo, hi;
    __mmask16 columns;
    bool split;
    Requantizer(const DotOutput& o, int panel)
        : scale(_mm512_loadu_ps(o.scale + 16 * panel)),
          offset(_mm512_loadu_ps(o.offset + 16 * panel)),
          offset_neg(_mm512_loadu_ps(o.offset_neg + 16 * panel)),
          lo(_mm512_set1_epi32(o.act_min)),
          hi(_mm512_set1_epi32(o.act_max)),
          columns(static_cast<__mmask16>(o.ncols >= 16 * static_cast<size_t>(panel) + 16
                                             ? 0xFFFFu
                                             : (1u << (o.ncols - 16 * static_cast<size_t>(panel))) - 1)),
          split(o.split) {}
    void store(Acc v, int8_t* dst) const {
      const __m512 x = _mm512_cvtepi32_ps(v);
      // The negative offsets where the accumulator (and so x) is negative, as VBLENDVPS by
      // x's sign does on AVX2 (x is never -0: it converts an integer).
      const __m512 off =
          split ? _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(v, _mm512_setzero_si512()), offset, offset_neg) : offset;
      const __m512i y = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_fmadd_ps(x, scale, off)), lo), hi);
      _mm512_mask_cvtsepi32_storeu_epi8(dst, columns, y);
    }
  };
};

constexpr DotTiles kTiles = dot_tiles<ZmmDot, 8, 2>();

}  // namespace

void qs8_gemm__avx512vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  qs8_gemm_dot(kTiles, w, a, out, out_stride);
}

void qs8_conv2d_direct__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_dot(kTiles, w, g, in, out);
}

}  // namespace edgeinf::qs8
