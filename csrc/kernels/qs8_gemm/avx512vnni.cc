// The VPDPBUSD GEMM on AVX-512 VNNI: 8x32 tiles, two zmm accumulators per row (two panels
// of 16 int32 columns), sixteen independent chains, requantizing on zmm where the float
// form applies.
// Compiled with -mavx512f -mavx512bw -mavx512vnni for this file only and selected at run
// time only when CPUID reports the features and the OS saves the zmm state (dispatch.cc);
// the file holds nothing but the micro-kernel (dot_gemm.h).
#include <immintrin.h>

// GCC 12 warns of the undefined pass-through operand inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <cstring>

#include "../qs8_conv2d/conv2d.h"
#include "dot_gemm.h"
#include "dot_indirect_tile_inl.h"
#include "dot_tile_inl.h"
#include "gemm.h"
#include "zmm_dot_inl.h"

namespace edgeinf::qs8 {
namespace {

// Tiles of 8 rows by up to two panels (16 chains of VPDPBUSD) and, in the float form, for
// layers of one panel (up to 16 output channels), of 12 rows by one: 12 chains instead of
// 8 (measured on Zen 5: 4-7% less time on the face models' 1x1 layers to 8 and 16
// channels; no gain in the other forms, whose epilogue dominates).
template <Form F>
struct FormTiles {
  static constexpr DotTiles kWide = dot_tiles<ZmmDot<F>, 8, 2>();
  static const DotTiles& of(const GemmWeights& w) {
    if constexpr (F == Form::kFloat) {
      static constexpr DotTiles kNarrow = dot_tiles<ZmmDot<F>, 12, 1>();
      if (w.n() <= 16) return kNarrow;
    }
    return kWide;
  }
};

// The tiles of the form the driver will pass them (dot_driver__avx2.cc's choice): the
// float form where it is exact and MXCSR rounds to nearest, else the guarded one where the
// weights have it, else the fixed-point steps.
const DotTiles& tiles_for(const GemmWeights& w) {
  switch (form_of(w)) {
    case Form::kFloat:
      return FormTiles<Form::kFloat>::of(w);
    case Form::kGuarded:
      return FormTiles<Form::kGuarded>::of(w);
    case Form::kFixed:
      break;
  }
  return FormTiles<Form::kFixed>::of(w);
}

// Indirect convolution: 6 pixels x 64 channels (24 chains, each pixel's quad broadcast once
// for four panels); one panel of channels in 8 x 16.
template <Form F>
struct FormIndirectTiles {
  static constexpr DotIndirectTiles kWide = dot_indirect_tiles<ZmmDot<F>, 6, 4>();
  static constexpr DotIndirectTiles kNarrow = dot_indirect_tiles<ZmmDot<F>, 8, 1>();
};

}  // namespace

void qs8_gemm__avx512vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  qs8_gemm_dot(tiles_for(w), w, a, out, out_stride);
}

void qs8_conv2d_direct__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d_dot(tiles_for(w.gemm()), w, g, in, out);
}

void qs8_conv2d_indirect__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  // the form tiles_for() picks, as the driver's epilogue does
  const Form form = form_of(w.gemm());
  if (form == Form::kFloat) {
    using T = FormIndirectTiles<Form::kFloat>;
    return qs8_conv2d_indirect_dot(T::kWide, T::kNarrow, w, g, in, out);
  }
  if (form == Form::kGuarded) {
    using T = FormIndirectTiles<Form::kGuarded>;
    return qs8_conv2d_indirect_dot(T::kWide, T::kNarrow, w, g, in, out);
  }
  using T = FormIndirectTiles<Form::kFixed>;
  qs8_conv2d_indirect_dot(T::kWide, T::kNarrow, w, g, in, out);
}

}  // namespace edgeinf::qs8
