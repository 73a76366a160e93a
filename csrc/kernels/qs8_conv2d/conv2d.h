// int8 conv2d, NHWC, with TFLite's reference arithmetic (ConvPerChannel).
//
// The scalar path is TFLite's reference loop. The SIMD paths take one of two routes:
//  - few input channels (in_c <= kSmallInputChannels, e.g. a 3-channel stem), and on
//    AVX2 also 1x1 filters of up to kAvx2DirectPointwiseChannels: a direct kernel. Each output pixel's window is copied
//    once into a row of K = k_h * k_w * in_c values (OHWI order, padded taps as the input zero point), and tiles of
//    rows are multiplied with weights packed at construction (ConvWeights), then requantized. Through the GEMM, the
//    3-value segments of such a convolution cost more to gather than to multiply. The
//    VPDPBUSD paths copy the windows the same way for their GEMM tiles (qs8_conv2d_dot).
//  - otherwise an indirection buffer (one pointer per output pixel and filter tap,
//    padded taps pointing at a row of zero points) run by the int8 GEMM of qs8_gemm, so
//    every ISA variant of the GEMM serves convolution as well (a pointwise convolution
//    without stride or padding points each row at its own pixel). On AVX2, with several
//    taps and an even channel count, the indirection points into input rows converted
//    once to int16 (qs8_conv2d_gemm__avx2). The VPDPBUSD paths run several taps of a
//    channel count that is a multiple of 4 on tiles that read a padded uint8 copy of the
//    input in place, window by window, without an indirection buffer
//    (qs8_conv2d_indirect_dot, qs8_gemm/dot_gemm.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../qs8_gemm/gemm.h"

namespace edgeinf::qs8 {

struct ConvGeometry {
  size_t batch, in_h, in_w, in_c;
  size_t out_h, out_w, out_c;
  size_t k_h, k_w;
  size_t stride_h, stride_w, dilation_h, dilation_w;
  ptrdiff_t pad_top, pad_left;  // TFLite's padding_values: the smaller half of SAME padding
};

inline constexpr size_t kSmallInputChannels = 4;
// On AVX2 the direct kernel also runs 1x1 filters of up to this many input channels: for
// such layers (each window a pixel's values, K = in_c) it measured 1.1-2.5x faster than
// the GEMM route on Zen 3 (the face detectors' 1x1 layers of 8 to 128 input channels).
inline constexpr size_t kAvx2DirectPointwiseChannels = 128;

// conv2d weights: the GEMM's [out_c][k_h * k_w * in_c] (TFLite's OHWI filter flattened)
// and, for few input channels, the direct kernel's panels.
class ConvWeights {
 public:
  // w is OHWI; bias may be null. Throws std::invalid_argument (GemmWeights' checks).
  ConvWeights(const int8_t* w, size_t out_c, size_t k_h, size_t k_w, size_t in_c, const int32_t* bias,
              int32_t input_zero_point, Requantization rq);

  const GemmWeights& gemm() const { return gemm_; }
  size_t out_c() const { return gemm_.n(); }
  size_t k() const { return gemm_.k(); }
  size_t in_c() const { return in_c_; }
  int32_t input_zero_point() const { return gemm_.input_zero_point(); }
  bool direct() const { return direct_; }            // the few-input-channel kernel applies
  bool avx2_direct() const { return avx2_direct_; }  // ... and on AVX2 (also pointwise layers)
  // The AVX2 requantization variant of these channels (rq_params.h's kRq* flags).
  int avx2_rq_flags() const { return avx2_rq_flags_; }
  // sum(w[c][t][*]) for filter tap t and output channel c, [k_h * k_w][out_c padded to 16]:
  // a tap's share of the accumulator start (qs8_conv2d_indirect_dot leaves padded taps out).
  const int32_t* tap_weight_sums() const { return tap_sums_.data(); }

  // Direct kernel panels (empty unless direct(); the AVX2 ones unless avx2_direct()); K is
  // padded with zero weights.
  //  - AVX2: [out_c / 16][k_h * avx2_row_pairs()][16 lanes][2] int16: each filter row's
  //    k_w * in_c values padded to an even count with a zero weight (the pairs then never
  //    straddle two filter rows), lanes in rq_params.h's unpack order, times 2^left_shift
  //    when every channel's left shift folds (rq_params.h); avx2_params():
  //    rq_params.h's blocks.
  //  - NEON: [out_c / 8][kp2 / 2][8 channels][2] int8 (VMULL + VPADAL).
  //  - NEON dot product: [out_c / 16][kp4 / 4][16 channels][4] int8, kp4 = K rounded up to 4.
  size_t kp2() const { return (k() + 1) / 2 * 2; }
  size_t kp4() const { return (k() + 3) / 4 * 4; }
  size_t k_h() const { return k_h_; }
  size_t k_w() const { return k_w_; }
  size_t avx2_row_pairs() const { return (k_w_ * in_c_ + 1) / 2; }
  const int16_t* avx2_panel() const { return avx2_panel_.data(); }
  const int32_t* avx2_params() const { return avx2_params_.data(); }
  const int8_t* neon_panel() const { return neon_panel_.data(); }
  const int8_t* neondot_panel() const { return neondot_panel_.data(); }

 private:
  GemmWeights gemm_;
  size_t k_h_, k_w_, in_c_;
  bool direct_ = false, avx2_direct_ = false;
  int avx2_rq_flags_ = 0;
  std::vector<int16_t> avx2_panel_;
  std::vector<int32_t> avx2_params_;
  std::vector<int8_t> neon_panel_, neondot_panel_;
  std::vector<int32_t> tap_sums_;
};

// Rows of the direct kernel for output pixels [p0, p0 + m) (pixels counted over batch,
// rows and columns): each output pixel's window in OHWI order, raw input values, the
// input zero point for taps outside the image, zeros from K up to kp; rows kp apart.
// With `wide`, filter rows of up to 16 values are copied as 16 bytes where the input has
// them, and values K to kp are left as they are (for kernels whose weights there are
// zero): dst then needs 16 bytes past its last row.
void conv_window_rows(const ConvGeometry& g, const int8_t* in, int8_t zero_point, size_t p0, size_t m, size_t kp,
                      int8_t* dst, bool wide = false);

// The NEON direct kernels' schedule: output pixels in chunks whose window rows (kp values
// each, conv_window_rows, wide: the panels' weights past K are zero) take about 16 kB,
// each chunk in tiles of `tile_rows` rows, calling tile(rows, count, first_pixel) with
// count <= tile_rows real rows; rows past the last pixel are zeros, computed and not stored.
template <typename Tile>
void for_each_window_tile(const ConvGeometry& g, const int8_t* in, int8_t zero_point, size_t kp, size_t tile_rows,
                          Tile&& tile) {
  const size_t pixels = g.batch * g.out_h * g.out_w;
  const size_t chunk = std::min<size_t>(std::max<size_t>(tile_rows, (16384 / kp) / tile_rows * tile_rows),
                                        (pixels + tile_rows - 1) / tile_rows * tile_rows);
  std::vector<int8_t> a(chunk * kp + 16, 0);
  for (size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const size_t m = std::min(chunk, pixels - p0);
    conv_window_rows(g, in, zero_point, p0, m, kp, a.data(), true);
    std::fill(a.begin() + static_cast<ptrdiff_t>(m * kp), a.end(), int8_t{0});
    for (size_t r0 = 0; r0 < m; r0 += tile_rows) tile(a.data() + r0 * kp, std::min(tile_rows, m - r0), p0 + r0);
  }
}

void qs8_conv2d__scalar(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d__gemm(const GemmWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_gemm__avx2(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_direct__avx2(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_direct__neon(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_direct__neondot(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);

}  // namespace edgeinf::qs8
