// int8 conv2d, NHWC, with TFLite's reference arithmetic (ConvPerChannel).
//
// The scalar path is TFLite's reference loop. The SIMD paths build an indirection
// buffer (one pointer per output pixel and filter tap, padded taps pointing at a row
// of zero points) and run the int8 GEMM of qs8_gemm, so every ISA variant of the GEMM
// serves convolution as well.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../qs8_gemm/gemm.h"

namespace edgeinf::qs8 {

struct ConvGeometry {
  size_t batch, in_h, in_w, in_c;
  size_t out_h, out_w, out_c;
  size_t k_h, k_w;
  size_t stride_h, stride_w, dilation_h, dilation_w;
  ptrdiff_t pad_top, pad_left;  // TFLite's padding_values: the smaller half of SAME padding
};

// Weights are the GEMM's [out_c][k_h * k_w * in_c] (TFLite's OHWI filter flattened).
void qs8_conv2d__scalar(const GemmWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d__gemm(const GemmWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d(const GemmWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);

}  // namespace edgeinf::qs8
