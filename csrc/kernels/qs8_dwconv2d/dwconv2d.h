// int8 depthwise conv2d, NHWC, with TFLite's reference arithmetic
// (reference_integer_ops::DepthwiseConvPerChannel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../qs8_requantize/requantize.h"

namespace edgeinf::qs8 {

struct DwGeometry {
  size_t batch, in_h, in_w, in_c, depth_multiplier;
  size_t out_h, out_w;  // out_c = in_c * depth_multiplier
  size_t k_h, k_w;
  size_t stride_h, stride_w, dilation_h, dilation_w;
  ptrdiff_t pad_top, pad_left;
};

class DwWeights {
 public:
  // w is TFLite's [1, k_h, k_w, channels] filter; bias may be null. Throws std::invalid_argument.
  DwWeights(const int8_t* w, size_t k_h, size_t k_w, size_t channels, const int32_t* bias, int32_t input_zero_point,
            Requantization rq);
  size_t k_h() const { return k_h_; }
  size_t k_w() const { return k_w_; }
  size_t channels() const { return channels_; }
  size_t padded_channels() const { return padded_; }
  int32_t input_zero_point() const { return input_zero_point_; }
  const int8_t* weights() const { return w_.data(); }       // [taps][channels]
  const int16_t* weights16() const { return w16_.data(); }  // [taps][padded_channels], zero padded
  const int32_t* bias() const { return bias_.data(); }      // [padded_channels]
  // bias[c] - input_zero_point * sum over taps of w[t][c] (wrapping): the start value of
  // paths that multiply raw int8 inputs, padded taps reading zero points.
  const int32_t* bias_minus_zero_point_terms() const { return bias_zp_.data(); }
  // Taps in pairs for VPMADDWD, per block of 16 channels in the order AVX2's unpack
  // gives: [pair][block][lanes 0-3, 8-11 | 4-7, 12-15 as (tap 2p, tap 2p+1)], 32 int16 per
  // half; an odd last tap is paired with zeros.
  const int16_t* tap_pairs16() const { return pairs16_.data(); }
  const Requantization& requantization() const { return rq_; }

 private:
  size_t k_h_, k_w_, channels_, padded_;
  int32_t input_zero_point_;
  std::vector<int8_t> w_;
  std::vector<int16_t> w16_, pairs16_;
  std::vector<int32_t> bias_, bias_zp_;
  Requantization rq_;
};

void qs8_dwconv2d__scalar(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d__avx2(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d__neon(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);

// Scalar output for one pixel and channel range [c0, c1) with depth_multiplier 1: the
// SIMD variants' tail.
void dwconv_pixel_channels(const DwWeights& w, const DwGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox,
                           size_t c0, size_t c1, int8_t* out);

}  // namespace edgeinf::qs8
