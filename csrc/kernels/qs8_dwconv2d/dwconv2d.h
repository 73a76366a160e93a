// int8 depthwise conv2d, NHWC, with TFLite's reference arithmetic
// (reference_integer_ops::DepthwiseConvPerChannel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../../quant/requantization.h"
#include "../../quant/rq_params.h"

namespace edgeinf::qs8 {

struct DwGeometry {
  size_t batch, in_h, in_w, in_c, depth_multiplier;
  size_t out_h, out_w;  // out_c = in_c * depth_multiplier
  size_t k_h, k_w;
  size_t stride_h, stride_w, dilation_h, dilation_w;
  ptrdiff_t pad_top, pad_left;
};

// Two filter taps that the SIMD paths multiply-add together. `second` < 0: a single tap
// (its partner reads the first tap's input with a zero weight).
struct DwTapPair {
  int first, second;
};

class DwWeights {
 public:
  // w is TFLite's [1, k_h, k_w, channels] filter; bias may be null. Expects
  // non-zero sizes and an int8 input zero point (asserted; the bindings check them).
  DwWeights(const int8_t* w, size_t k_h, size_t k_w, size_t channels, const int32_t* bias, int32_t input_zero_point,
            Requantization rq);
  size_t k_h() const { return k_h_; }
  size_t k_w() const { return k_w_; }
  size_t channels() const { return channels_; }
  size_t padded_channels() const { return padded_; }
  int32_t input_zero_point() const { return input_zero_point_; }
  const int8_t* weights() const { return w_.data(); }   // [taps][channels]
  const int32_t* bias() const { return bias_.data(); }  // [padded_channels]
  // bias[c] - input_zero_point * sum over taps of w[t][c] (wrapping): the start value of
  // paths that multiply raw int8 inputs, padded taps reading zero points.
  const int32_t* bias_minus_zero_point_terms() const { return bias_zp_.data(); }
  const Requantization& requantization() const { return rq_; }
  // No weight is -128: two int8 products then sum within int16 (|sum| <= 2 * 128 * 127).
  bool weights_above_min() const { return weights_above_min_; }
  // The AVX2 requantization variant of these channels (rq_params.h's kRq* flags).
  int avx2_rq_flags() const { return avx2_rq_flags_; }
  // The NEON kernel's float form of the requantization (rq_params.h; accumulators from
  // bias_minus_zero_point_terms(), not shifted), padded, or null where it was not found exact.
  const FloatRequantization* neon_float_requantization() const {
    return neon_float_rq_.scale.empty() ? nullptr : &neon_float_rq_;
  }

  // Tap pairs: rows 2r and 2r+1 of each filter column (r < k_h / 2), then for an odd k_h
  // the last row's columns 2j and 2j+1 (an odd last column alone). Taps are ky * k_w + kx.
  const std::vector<DwTapPair>& pairs() const { return pairs_; }

  // AVX2 panels, per block of 16 channels (padded_channels / 16 blocks):
  //  - pairs: [block][pair][2 halves][8 lanes][2 taps] int16; half 0 holds channels 0-3
  //    and 8-11 of the block, half 1 channels 4-7 and 12-15 (VPUNPCKL/HWD's order);
  //    weights times 2^left_shift when every channel's left shift folds (rq_params.h);
  //  - params: rq_params.h's blocks (the start value is bias_minus_zero_point_terms()).
  //  - when the channel count is above 16 and not a multiple of it, the last block holds
  //    channels [channels - 16, channels), overlapping the block before: every channel is
  //    then computed by SIMD (the overlapping ones twice, to equal values), without a
  //    scalar tail or a padded copy of the tensors.
  const int16_t* avx2_pairs() const { return avx2_pairs_.data(); }
  bool avx2_last_block_overlaps() const { return overlap_last_; }
  const int32_t* avx2_params() const { return avx2_params_.data(); }

  // NEON panels (built on aarch64): per block of 16 channels (padded_channels / 16), per
  // tap, the block's 16 weights (zeros past the channel count), so that a kernel walks
  // one block's weights with one pointer.
  const int8_t* neon_panel() const { return neon_panel_.data(); }

  // NEON dot-product panels (built on aarch64, for 16 channels or more): per block of 16
  // channels (neondot_blocks() of them, the last one holding channels [channels - 16,
  // channels) when 16 does not divide the count), per filter column kx and group of four
  // filter rows (neondot_row_groups()), 64 bytes: lane i of vector j (16 bytes each) holds
  // channel 4j + i's weights of the group's four rows, zero for rows past k_h.
  size_t neondot_blocks() const { return channels_ >= 16 ? (channels_ + 15) / 16 : 0; }
  size_t neondot_row_groups() const { return (k_h_ + 3) / 4; }
  const int8_t* neondot_panel() const { return neondot_panel_.data(); }

  // Flat panels (built with the avx512vnni path, for fewer than 16 channels): a stride-1
  // output row is one run of out_w * channels values, value f of channel f % channels,
  // whose tap t = ky * k_w + kx reads the input row's value f + (kx * dilation_w -
  // pad_left) * channels. The run is taken 64 values per zmm block (VPDPBUSD, 4 taps per instruction), so block q of a
  // row holds the channels of values 64q .. 64q + 63, which repeat every flat_panels() = channels / gcd(channels, 64)
  // blocks; 0 when not built. Four accumulators k = 0-3 hold value 16 (m / 4) + 4k + m % 4 of the block in lane m (the
  // order of VPUNPCKL/HBW then VPUNPCKL/HWD of the taps' bytes; VPACKSSDW then VPACKSSWB restore it).
  //  - weights: [panel][tap group of 4][4 accumulators][16 lanes][4 taps] int8, zero
  //    past the last tap;
  //  - params: [panel][kRqParams][4 accumulators][16 lanes] int32, rq_params.h's values per
  //    lane, except that the start value is that of inputs offset by +128 (unsigned), not
  //    shifted, and the left shift is the channel's own (see flat_left_shifts()).
  size_t flat_panels() const { return flat_panels_; }
  size_t flat_tap_groups() const { return (k_h_ * k_w_ + 3) / 4; }
  const int8_t* flat_weights() const { return flat_weights_.data(); }
  const int32_t* flat_params() const { return flat_params_.data(); }
  bool flat_left_shifts() const { return flat_left_shifts_; }  // some channel shifts left

 private:
  void pack_flat_panels();  // from the AVX2 panels (flat_panels.cc)
  size_t flat_panels_ = 0;
  bool flat_left_shifts_ = false;
  std::vector<int8_t> flat_weights_;
  std::vector<int32_t> flat_params_;

  size_t k_h_, k_w_, channels_, padded_;
  int32_t input_zero_point_;
  bool weights_above_min_ = true;
  bool overlap_last_ = false;
  int avx2_rq_flags_ = 0;
  std::vector<int8_t> w_, neon_panel_, neondot_panel_;
  std::vector<int16_t> avx2_pairs_;
  std::vector<int32_t> bias_, bias_zp_, avx2_params_;
  std::vector<DwTapPair> pairs_;
  Requantization rq_;
  FloatRequantization neon_float_rq_;
};

void qs8_dwconv2d__scalar(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d__avx2(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d__avx512vnni(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d__neon(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d__neondot(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);
void qs8_dwconv2d(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out);

// Scalar outputs [c0, c1) of one pixel (any depth multiplier): the SIMD variants' tail.
void dwconv_pixel_channels(const DwWeights& w, const DwGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox,
                           size_t c0, size_t c1, int8_t* out);

// Input rows as the SIMD paths read them: out_c = in_c * depth_multiplier int8 values per
// pixel, i.e. the input itself for a multiplier of 1 and rows with each channel repeated
// `multiplier` times otherwise (built once per row, kept in a ring while the filter
// window slides over them). Rows outside the image are a row of input zero points.
class DwRows {
 public:
  DwRows(const DwGeometry& g, const int8_t* in, int8_t zero_point);
  // rows[ky] for output row oy of image b, ky < k_h.
  void get(size_t b, size_t oy, const int8_t** rows);
  const int8_t* zero_row() const { return zero_.data(); }  // in_w pixels plus 64 bytes of slack
  size_t channels() const { return oc_; }                  // values per pixel

 private:
  const DwGeometry& g_;
  const int8_t* in_;
  size_t oc_, slots_;
  std::vector<int8_t> zero_, ring_;
  std::vector<ptrdiff_t> tags_;  // b * in_h + iy held by each ring slot, -1 if none
};

}  // namespace edgeinf::qs8
