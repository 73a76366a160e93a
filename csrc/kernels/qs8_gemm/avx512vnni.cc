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
#include "dot_indirect_tile_inl.h"
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

  // The epilogue (DotOutput) of one panel, 16 columns per instruction, in either form:
  // results clamped in int32 and narrowed with saturation by a masked VPMOVSDB store, which
  // equals the AVX2 epilogue's saturating packs (and zero point add) followed by the clamp.
  static constexpr bool kRequantizes = true;
  struct Requantizer {
    bool in_float, split;
    __m512 scale, offset, offset_neg;
    __m512i multiplier, multiplier_odd, left_shift, right_shift, half, zero_point;
    __m512i lo, hi;
    __mmask16 columns;
    Requantizer(const DotOutput& o, int panel)
        : in_float(o.scale != nullptr),
          split(o.split),
          lo(_mm512_set1_epi32(o.act_min)),
          hi(_mm512_set1_epi32(o.act_max)),
          columns(static_cast<__mmask16>(o.ncols >= 16 * static_cast<size_t>(panel) + 16
                                             ? 0xFFFFu
                                             : (1u << (o.ncols - 16 * static_cast<size_t>(panel))) - 1)) {
      const size_t c0 = 16 * static_cast<size_t>(panel);
      if (in_float) {
        scale = _mm512_loadu_ps(o.scale + c0), offset = _mm512_loadu_ps(o.offset + c0);
        offset_neg = _mm512_loadu_ps(o.offset_neg + c0);
        return;
      }
      multiplier = _mm512_loadu_si512(o.multiplier + c0);
      multiplier_odd = _mm512_srli_epi64(multiplier, 32);
      left_shift = _mm512_loadu_si512(o.left_shift + c0);
      right_shift = _mm512_loadu_si512(o.right_shift + c0);
      half = _mm512_srli_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), right_shift), 1);
      zero_point = _mm512_set1_epi32(o.zero_point);
    }
    void store(Acc v, int8_t* dst) const {
      const __m512i zero = _mm512_setzero_si512();
      __m512i y;
      if (in_float) {
        const __m512 x = _mm512_cvtepi32_ps(v);
        // The negative offsets where the accumulator (and so x) is negative, as VBLENDVPS
        // by x's sign does on AVX2 (x is never -0: it converts an integer).
        const __m512 off = split ? _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(v, zero), offset, offset_neg) : offset;
        y = _mm512_cvtps_epi32(_mm512_fmadd_ps(x, scale, off));
      } else {
        // rq_avx2_inl.h's mbqm8 on 16 lanes: the rounding doubling high multiply of the
        // even and the odd lanes, then the rounding right shift on magnitudes (away from
        // zero), the sign restored by a masked negation (AVX-512 has no VPSIGND).
        const __m512i x = _mm512_sllv_epi32(v, left_shift);
        const __m512i round = _mm512_set1_epi64(int64_t{1} << 30);
        const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, multiplier), round), 31);
        const __m512i odd_sum = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), multiplier_odd), round);
        const __m512i high = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_add_epi64(odd_sum, odd_sum));
        const __m512i mag = _mm512_srlv_epi32(_mm512_add_epi32(_mm512_abs_epi32(high), half), right_shift);
        const __m512i shifted = _mm512_mask_sub_epi32(mag, _mm512_cmplt_epi32_mask(high, zero), zero, mag);
        // VPACKSSDW's int16 saturation, then the zero point (VPADDSW saturates too, but
        // within the int8 clamp that follows it cannot matter).
        const __m512i i16 =
            _mm512_min_epi32(_mm512_max_epi32(shifted, _mm512_set1_epi32(-32768)), _mm512_set1_epi32(32767));
        y = _mm512_add_epi32(i16, zero_point);
      }
      _mm512_mask_cvtsepi32_storeu_epi8(dst, columns, _mm512_min_epi32(_mm512_max_epi32(y, lo), hi));
    }
  };
};

constexpr DotTiles kTiles = dot_tiles<ZmmDot, 8, 2>();
// Indirect convolution: 6 pixels x 64 channels (24 chains, each pixel's quad broadcast once
// for four panels); one panel of channels in 8 x 16.
constexpr DotIndirectTiles kIndirectTiles = dot_indirect_tiles<ZmmDot, 6, 4>();
constexpr DotIndirectTiles kNarrowIndirectTiles = dot_indirect_tiles<ZmmDot, 8, 1>();

}  // namespace

void qs8_gemm__avx512vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  qs8_gemm_dot(kTiles, w, a, out, out_stride);
}

void qs8_conv2d_direct__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_dot(kTiles, w, g, in, out);
}

void qs8_conv2d_indirect__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_indirect_dot(kIndirectTiles, kNarrowIndirectTiles, w, g, in, out);
}

}  // namespace edgeinf::qs8
