// The VPDPBUSD ops on zmm (dot_tile_inl.h's D) and the AVX-512 epilogue that requantizes 16
// int32 columns per instruction, shared by the AVX-512 VNNI tiles (avx512vnni.cc) and the
// AMX GEMM (avx512amx.cc), which runs the same epilogue on the tiles it stores.
//
// Include only from files compiled with AVX-512 VNNI: everything here has internal linkage.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "dot_gemm.h"
#include "gemm.h"

namespace edgeinf::qs8 {
namespace {

// The requantization that a set of tiles applies (DotOutput): the float form, the guarded
// float form or the fixed-point steps, each its own set of tiles so that a tile holds only
// its form's parameters and branches on none.
enum class Form { kFloat, kGuarded, kFixed };

// The form the weights requantize in here: the float form where it is exact and MXCSR
// rounds to nearest, else the guarded one where the weights have it, else the fixed-point
// steps (the choice of dot_driver__avx2.cc's epilogue too).
inline Form form_of(const GemmWeights& w) {
  if (w.float_requantization() != nullptr && (_mm_getcsr() & _MM_ROUND_MASK) == _MM_ROUND_NEAREST) {
    return Form::kFloat;
  }
  return w.guarded_float_requantization() != nullptr ? Form::kGuarded : Form::kFixed;
}

template <Form F>
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
  static constexpr bool kRechecks = F == Form::kGuarded;
  struct Requantizer {
    bool split;
    __m512 scale, offset, offset_neg;
    __m512i multiplier, multiplier_odd, left_shift, right_shift, half, zero_point;
    __m512i lo, hi;
    __mmask16 columns;
    const DotOutput* o;
    size_t c0;
    mutable __mmask16 unsure_columns = 0;  // the guarded form's vectors near a half-integer
    Requantizer(const DotOutput& out, int panel)
        : split(out.split),
          lo(_mm512_set1_epi32(out.act_min)),
          hi(_mm512_set1_epi32(out.act_max)),
          columns(static_cast<__mmask16>(out.ncols >= 16 * static_cast<size_t>(panel) + 16
                                             ? 0xFFFFu
                                             : (1u << (out.ncols - 16 * static_cast<size_t>(panel))) - 1)),
          o(&out),
          c0(16 * static_cast<size_t>(panel)) {
      if constexpr (F != Form::kFixed) {
        scale = _mm512_loadu_ps(out.scale + c0), offset = _mm512_loadu_ps(out.offset + c0);
        offset_neg = _mm512_loadu_ps(out.offset_neg + c0);
      } else {
        load_fixed(out, c0, &multiplier, &multiplier_odd, &left_shift, &right_shift, &half);
        zero_point = _mm512_set1_epi32(out.zero_point);
      }
    }
    static void load_fixed(const DotOutput& out, size_t c0, __m512i* multiplier, __m512i* multiplier_odd,
                           __m512i* left_shift, __m512i* right_shift, __m512i* half) {
      *multiplier = _mm512_loadu_si512(out.multiplier + c0);
      *multiplier_odd = _mm512_srli_epi64(*multiplier, 32);
      *left_shift = _mm512_loadu_si512(out.left_shift + c0);
      *right_shift = _mm512_loadu_si512(out.right_shift + c0);
      *half = _mm512_srli_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), *right_shift), 1);
    }
    // TFLite's fixed-point steps, then the zero point: rq_avx2_inl.h's mbqm8 on 16 lanes,
    // the rounding doubling high multiply of the even and the odd lanes, then the rounding
    // right shift on magnitudes (away from zero), the sign restored by a masked negation
    // (AVX-512 has no VPSIGND), VPACKSSDW's int16 saturation and the zero point (VPADDSW
    // saturates too, but within the int8 clamp that follows it cannot matter).
    static __m512i fixed(__m512i v, __m512i multiplier, __m512i multiplier_odd, __m512i left_shift, __m512i right_shift,
                         __m512i half, __m512i zero_point) {
      const __m512i zero = _mm512_setzero_si512();
      const __m512i x = _mm512_sllv_epi32(v, left_shift);
      const __m512i round = _mm512_set1_epi64(int64_t{1} << 30);
      const __m512i even = _mm512_srli_epi64(_mm512_add_epi64(_mm512_mul_epi32(x, multiplier), round), 31);
      const __m512i odd_sum = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(x, 32), multiplier_odd), round);
      const __m512i high = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_add_epi64(odd_sum, odd_sum));
      const __m512i mag = _mm512_srlv_epi32(_mm512_add_epi32(_mm512_abs_epi32(high), half), right_shift);
      const __m512i shifted = _mm512_mask_sub_epi32(mag, _mm512_cmplt_epi32_mask(high, zero), zero, mag);
      const __m512i i16 =
          _mm512_min_epi32(_mm512_max_epi32(shifted, _mm512_set1_epi32(-32768)), _mm512_set1_epi32(32767));
      return _mm512_add_epi32(i16, zero_point);
    }
    bool unsure() const { return unsure_columns != 0; }
    // The fixed-point steps, their parameters loaded here (rarely needed: they stay out of
    // the tile's registers).
    void store_exact(Acc v, int8_t* dst) const {
      __m512i m, m_odd, l, r, h;
      load_fixed(*o, c0, &m, &m_odd, &l, &r, &h);
      const __m512i y = fixed(v, m, m_odd, l, r, h, _mm512_set1_epi32(o->zero_point));
      _mm512_mask_cvtsepi32_storeu_epi8(dst, columns, _mm512_min_epi32(_mm512_max_epi32(y, lo), hi));
    }
    void store(Acc v, int8_t* dst) const {
      const __m512i zero = _mm512_setzero_si512();
      __m512i y;
      if constexpr (F == Form::kFloat) {
        const __m512 x = _mm512_cvtepi32_ps(v);
        // The negative offsets where the accumulator (and so x) is negative, as VBLENDVPS
        // by x's sign does on AVX2 (x is never -0: it converts an integer).
        const __m512 off = split ? _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(v, zero), offset, offset_neg) : offset;
        y = _mm512_cvtps_epi32(_mm512_fmadd_ps(x, scale, off));
      } else if constexpr (F == Form::kGuarded) {
        // TFLite's result is floor(x * M + 1/2 + d) + zp, d = 2^-(r+1) for x >= 0 and
        // -2^-(r+1) below (docs/int8.md; r >= 1 here), i.e. the nearest integer to
        // u = x * M + zp + d unless u is a half-integer. Where the output is not saturated
        // (|x * M| <= about 2^8), t below is within 3 * 2^-16 of u: float(x) and float(M)
        // are each 2^-24 relative off, the offset and the FMA's rounding at most 2^-17 off.
        // Elsewhere t saturates with u (and |t| < 2^31: M < 1/2). So t's nearest integer is
        // TFLite's result unless t lies within 2^-14 of a half-integer: the rare panel with
        // such a vector (unsure()) is stored again by the fixed-point steps. The roundings
        // are explicit, so MXCSR does not matter.
        constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        const __m512 x = _mm512_cvt_roundepi32_ps(v, kNearest);
        const __m512 off = _mm512_mask_blend_ps(_mm512_cmplt_epi32_mask(v, zero), offset, offset_neg);
        const __m512 t = _mm512_fmadd_round_ps(x, scale, off, kNearest);
        const __m512 n = _mm512_roundscale_ps(t, kNearest);
        const __m512 apart = _mm512_abs_ps(_mm512_sub_ps(t, n));  // exact: n is t's nearest integer
        const __mmask16 near_half = _mm512_cmp_ps_mask(apart, _mm512_set1_ps(0.5f - 1.0f / 16384), _CMP_GT_OQ);
        unsure_columns |= near_half;
        y = _mm512_cvttps_epi32(n);
      } else {
        y = fixed(v, multiplier, multiplier_odd, left_shift, right_shift, half, zero_point);
      }
      _mm512_mask_cvtsepi32_storeu_epi8(dst, columns, _mm512_min_epi32(_mm512_max_epi32(y, lo), hi));
    }
  };
};

}  // namespace
}  // namespace edgeinf::qs8
