// Per-channel requantization parameters of the direct conv and depthwise SIMD paths,
// packed per block of 16 output channels in the lane order of their accumulators.
//
// The accumulators of a block are two 8-lane halves in VPUNPCKL/HWD's order: half 0
// holds channels 0-3 and 8-11, half 1 channels 4-7 and 12-15, so that VPACKSSDW of the
// two halves gives channels 0-15 in order. The parameters follow the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../dispatch.h"
#include "requantization.h"

namespace edgeinf::qs8 {

enum RqParam : size_t {
  kRqStart = 0,      // accumulator start value (bias, zero point term folded in)
  kRqMultiplier,     // Q31 multiplier
  kRqMultiplierOdd,  // the multiplier of lane i | 1 (VPMULDQ reads even lanes)
  kRqLeftShift,      // max(shift, 0)
  kRqRightShift,     // max(-shift, 0)
  kRqHalf,           // (1 << right_shift) >> 1, the rounding term
  kRqScale,          // float form (kRqFloat, below): the factor, as float bits
  kRqOffset,         // float form: the term added to accumulators >= 0, as float bits
  kRqOffsetNeg,      // float form: the term added to accumulators < 0, as float bits
  kRqParams
};

// Channel of lane i (0-7) of half h (0-1) within a block of 16.
inline size_t unpack_lane_channel(size_t h, size_t i) { return (i / 4) * 8 + h * 4 + i % 4; }

// Left shifts up to this one are folded into the AVX2 panels' int16 weights (w * 2^s still
// fits int16 for int8 w, a VPMADDWD pair sum int32) and into the start values, which then
// equal the shifted accumulator modulo 2^32, as the reference's wrapping shift does.
inline constexpr int32_t kMaxFoldedLeftShift = 8;

inline bool left_shifts_fold(const Requantization& rq, size_t channels) {
  for (size_t c = 0; c < channels; ++c) {
    if (rq.left_shift[c] > kMaxFoldedLeftShift) return false;
  }
  return true;
}

// Variants of the AVX2 requantization, as template flags (rq_avx2_inl.h): kRqLeft when some
// channel shifts left by more than the weights carry, kRqRight when some channel shifts
// right (multipliers below 1/2), kRqClamp when the activation range is narrower than int8
// (else the saturating packs are the clamp), kRqFloat when every channel has a float form
// (FloatRequantization) and the left shifts fold.
enum : int { kRqLeft = 1, kRqClamp = 2, kRqRight = 4, kRqFloat = 8 };

// The flags of channels [0, channels), whose left shifts are folded into the weights or not.
inline int avx2_rq_flags(const Requantization& rq, size_t channels, bool fold_left) {
  int flags = rq.act_min > -128 || rq.act_max < 127 ? kRqClamp : 0;
  for (size_t c = 0; c < channels; ++c) {
    if (!fold_left && rq.left_shift[c] != 0) flags |= kRqLeft;
    if (rq.right_shift[c] != 0) flags |= kRqRight;
  }
  return flags;
}

// The requantization of an accumulator, the output zero point and the int8 saturation as
// one float multiply-add: out = saturate_int8(nearest_even(fma(float(acc), scale[c],
// acc < 0 ? offset_neg[c] : offset[c]))). It has 3-4 vector operations per 8 lanes where
// the fixed-point form has 8-12, and it is used only where it was found exact: for each
// channel, fit_float_requantization checks every accumulator whose output is not saturated
// (rq_float__avx2.cc); beyond them both forms saturate, the float one being monotonic.
struct FloatRequantization {
  std::vector<float> scale, offset, offset_neg;
  bool split = false;  // offset_neg differs from offset somewhere
};

// The float forms of channels [0, channels) whose accumulators lie within +-acc_bound[c],
// their left shifts either folded into the accumulators or applied by the requantization,
// or of the double requantization (requantize_double) when double_scale is given (rq then
// supplies the zero point); false when some channel has none that is exact, or when the
// build's vector ISA (AVX2 on x86-64, NEON on aarch64: the checks run its instructions)
// is not available. Both ISAs compute the same IEEE operations, so a form fitted by either
// holds for both; each proves it with its own.
// (rq_float.cc)
bool fit_float_requantization(const Requantization& rq, const int64_t* acc_bound, size_t channels,
                              bool left_shift_folded, const double* double_scale, FloatRequantization* out);

// The float form of channels whose accumulators are start[c] (not shifted) plus products
// of raw int8 inputs by weights whose magnitudes sum to abs_weight_sum[c], the left shift
// applied by the requantization: the NEON kernels' accumulators. Padded with zeros to
// `padded` channels; false (and *out untouched) where it does not fit.
inline bool fit_unshifted_float_form(const Requantization& rq, const int32_t* start, const int64_t* abs_weight_sum,
                                     size_t channels, size_t padded, FloatRequantization* out) {
  std::vector<int64_t> bound(channels);
  for (size_t c = 0; c < channels; ++c) bound[c] = std::abs(int64_t{start[c]}) + 128 * abs_weight_sum[c];
  if (!fit_float_requantization(rq, bound.data(), channels, false, nullptr, out)) return false;
  out->scale.resize(padded, 0.0f), out->offset.resize(padded, 0.0f), out->offset_neg.resize(padded, 0.0f);
  return true;
}

// Per channel c: (*bias_out)[c] = bias[c] (0 without a bias) and (*bias_zp)[c] = bias[c] -
// input_zero_point * (the sum of w[c * channel_stride + t * tap_stride] over t < taps), in
// wrapping int32 arithmetic like the reference accumulator; both zero up to `padded`.
inline void fold_input_zero_point(const int8_t* w, const int32_t* bias, int32_t input_zero_point, size_t channels,
                                  size_t taps, size_t channel_stride, size_t tap_stride, size_t padded,
                                  std::vector<int32_t>* bias_out, std::vector<int32_t>* bias_zp) {
  bias_out->assign(padded, 0);
  bias_zp->assign(padded, 0);
  for (size_t c = 0; c < channels; ++c) {
    (*bias_out)[c] = bias ? bias[c] : 0;
    uint32_t sum = 0;
    for (size_t t = 0; t < taps; ++t) sum += static_cast<uint32_t>(int32_t{w[c * channel_stride + t * tap_stride]});
    (*bias_zp)[c] =
        static_cast<int32_t>(static_cast<uint32_t>((*bias_out)[c]) - static_cast<uint32_t>(input_zero_point) * sum);
  }
}

// Per channel c, the sum of |w[c * channel_stride + t * tap_stride]| over t < taps: with
// the start value, what bounds the accumulators that the float form must cover.
inline std::vector<int64_t> abs_weight_sums(const int8_t* w, size_t channels, size_t taps, size_t channel_stride,
                                            size_t tap_stride) {
  std::vector<int64_t> sums(channels, 0);
  for (size_t c = 0; c < channels; ++c) {
    for (size_t t = 0; t < taps; ++t) sums[c] += std::abs(int{w[c * channel_stride + t * tap_stride]});
  }
  return sums;
}

// `flags` (AVX2's) with kRqFloat when the float form fits (into *out). Channel c's
// accumulator is start[c] shifted left by its left shift plus products of raw int8 inputs
// by weights whose magnitudes sum to abs_weight_sum[c] before the shift; with kRqLeft, or
// in a build without AVX2, nothing is fitted.
inline int with_float_form(int flags, const Requantization& rq, const int32_t* start, const int64_t* abs_weight_sum,
                           size_t channels, FloatRequantization* out) {
#if !defined(EDGEINF_BUILD_AVX2)
  return flags;
#endif
  if (flags & kRqLeft) return flags;
  std::vector<int64_t> bound(channels);
  for (size_t c = 0; c < channels; ++c) {
    const int l = rq.left_shift[c];
    bound[c] = std::abs(int64_t{shift_left_wrapping(start[c], l)}) + 128 * (abs_weight_sum[c] << l);
  }
  return fit_float_requantization(rq, bound.data(), channels, true, nullptr, out) ? flags | kRqFloat : flags;
}

// dst: [blocks][kRqParams][2 halves][8 lanes]; channels past `channels` get zeros.
// rq must have at least blocks * 16 entries (Requantization::pad_to). With fold_left, the
// start values carry the left shift and the left-shift parameters are 0. The float form's
// parameters are filled when `fl` is given. With overlap_last, the last block holds
// channels [channels - 16, channels) (see DwWeights::avx2_last_block_overlaps).
inline void pack_rq_params(const int32_t* start, const Requantization& rq, size_t channels, size_t blocks,
                           bool fold_left, const FloatRequantization* fl, int32_t* dst, bool overlap_last = false) {
  for (size_t b = 0; b < blocks; ++b) {
    int32_t* prm = dst + b * kRqParams * 16;
    const size_t base = overlap_last && b + 1 == blocks ? channels - 16 : b * 16;
    for (size_t h = 0; h < 2; ++h) {
      for (size_t i = 0; i < 8; ++i) {
        const size_t c = base + unpack_lane_channel(h, i);
        const size_t c_odd = base + unpack_lane_channel(h, i | 1);
        const size_t at = h * 8 + i;
        const bool live = c < channels;
        const int32_t rs = live ? rq.right_shift[c] : 0;
        prm[kRqStart * 16 + at] = live ? (fold_left ? shift_left_wrapping(start[c], rq.left_shift[c]) : start[c]) : 0;
        prm[kRqMultiplier * 16 + at] = live ? rq.multiplier[c] : 0;
        prm[kRqMultiplierOdd * 16 + at] = c_odd < channels ? rq.multiplier[c_odd] : 0;
        prm[kRqLeftShift * 16 + at] = live && !fold_left ? rq.left_shift[c] : 0;
        prm[kRqRightShift * 16 + at] = rs;
        prm[kRqHalf * 16 + at] = static_cast<int32_t>((int64_t{1} << rs) >> 1);
        if (fl && live) {
          std::memcpy(&prm[kRqScale * 16 + at], &fl->scale[c], sizeof(float));
          std::memcpy(&prm[kRqOffset * 16 + at], &fl->offset[c], sizeof(float));
          std::memcpy(&prm[kRqOffsetNeg * 16 + at], &fl->offset_neg[c], sizeof(float));
        }
      }
    }
  }
}

}  // namespace edgeinf::qs8
