// Scalar reference depthwise conv2d and its weight preparation.
#include <algorithm>
#include <cassert>

#include "dwconv2d.h"

namespace edgeinf::qs8 {

DwWeights::DwWeights(const int8_t* w, size_t k_h, size_t k_w, size_t channels, const int32_t* bias,
                     int32_t input_zero_point, Requantization rq)
    : k_h_(k_h),
      k_w_(k_w),
      channels_(channels),
      padded_((channels + 15) / 16 * 16),
      input_zero_point_(input_zero_point),
      w_(w, w + k_h * k_w * channels),
      rq_(std::move(rq)) {
  // Preconditions, checked by the bindings (bindings/quant_arrays.h).
  assert(k_h > 0 && k_w > 0 && channels > 0);
  assert(input_zero_point >= -128 && input_zero_point <= 127);
  assert(rq_.channels() == channels);
  const size_t taps = k_h * k_w;
  for (int8_t v : w_) weights_above_min_ = weights_above_min_ && v != -128;
  for (size_t r = 0; r < k_h / 2; ++r) {
    for (size_t kx = 0; kx < k_w; ++kx) {
      pairs_.push_back({static_cast<int>(2 * r * k_w + kx), static_cast<int>((2 * r + 1) * k_w + kx)});
    }
  }
  if (k_h % 2 == 1) {
    const size_t row = (k_h - 1) * k_w;
    for (size_t kx = 0; kx < k_w; kx += 2) {
      pairs_.push_back({static_cast<int>(row + kx), kx + 1 < k_w ? static_cast<int>(row + kx + 1) : -1});
    }
  }
  fold_input_zero_point(w_.data(), bias, input_zero_point, channels, taps, 1, channels, padded_, &bias_, &bias_zp_);
  rq_.pad_to(padded_);
  const bool fold = left_shifts_fold(rq_, channels);
  avx2_rq_flags_ = qs8::avx2_rq_flags(rq_, channels, fold);
  const std::vector<int64_t> abs_sum = abs_weight_sums(w_.data(), channels, taps, 1, channels);
  FloatRequantization fl;
  avx2_rq_flags_ = with_float_form(avx2_rq_flags_, rq_, bias_zp_.data(), abs_sum.data(), channels, &fl);
#if defined(EDGEINF_BUILD_NEON)
  fit_unshifted_float_form(rq_, bias_zp_.data(), abs_sum.data(), channels, padded_, &neon_float_rq_);
  neon_panel_.assign(padded_ * taps, 0);
  for (size_t c = 0; c < channels; ++c) {
    for (size_t t = 0; t < taps; ++t) neon_panel_[(c / 16 * taps + t) * 16 + c % 16] = w_[t * channels + c];
  }
  const size_t groups = neondot_row_groups();
  neondot_panel_.assign(neondot_blocks() * k_w * groups * 64, 0);
  for (size_t b = 0; b < neondot_blocks(); ++b) {
    const size_t base = std::min(b * 16, channels - 16);
    for (size_t kx = 0; kx < k_w; ++kx) {
      for (size_t g = 0; g < groups; ++g) {
        int8_t* dst = neondot_panel_.data() + ((b * k_w + kx) * groups + g) * 64;
        for (size_t c = 0; c < 16; ++c) {
          for (size_t r = 0; r < 4 && 4 * g + r < k_h; ++r)
            dst[4 * c + r] = w_[((4 * g + r) * k_w + kx) * channels + base + c];
        }
      }
    }
  }
#endif

  // AVX2 panels, in unpack lane order (rq_params.h).
  const size_t blocks = padded_ / 16, npairs = pairs_.size();
  overlap_last_ = channels > 16 && channels % 16 != 0;
  avx2_pairs_.assign(blocks * npairs * 32, 0);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t base = overlap_last_ && b + 1 == blocks ? channels - 16 : b * 16;
    for (size_t p = 0; p < npairs; ++p) {
      for (size_t h = 0; h < 2; ++h) {
        for (size_t i = 0; i < 8; ++i) {
          const size_t c = base + unpack_lane_channel(h, i);
          int16_t* dst = avx2_pairs_.data() + ((b * npairs + p) * 2 + h) * 16 + 2 * i;
          if (c >= channels) continue;
          const int32_t scale = fold ? 1 << rq_.left_shift[c] : 1;
          dst[0] = static_cast<int16_t>(w_[pairs_[p].first * channels + c] * scale);
          dst[1] = static_cast<int16_t>(pairs_[p].second < 0 ? 0 : w_[pairs_[p].second * channels + c] * scale);
        }
      }
    }
  }
  avx2_params_.assign(blocks * kRqParams * 16, 0);
  pack_rq_params(bias_zp_.data(), rq_, channels, blocks, fold, avx2_rq_flags_ & kRqFloat ? &fl : nullptr,
                 avx2_params_.data(), overlap_last_);
#if defined(EDGEINF_BUILD_AVX512VNNI)
  pack_flat_panels();
#endif
}

namespace {

inline int8_t dw_output(const DwWeights& w, const DwGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox,
                        size_t oc) {
  const size_t ic = oc / g.depth_multiplier;
  const size_t out_c = g.in_c * g.depth_multiplier;
  const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
  const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
  uint32_t acc = 0;  // int32 with wrap-around, as compiled
  for (size_t ky = 0; ky < g.k_h; ++ky) {
    for (size_t kx = 0; kx < g.k_w; ++kx) {
      const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
      const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
      if (iy < 0 || ix < 0 || iy >= static_cast<ptrdiff_t>(g.in_h) || ix >= static_cast<ptrdiff_t>(g.in_w)) continue;
      const int32_t x = in[((b * g.in_h + iy) * g.in_w + ix) * g.in_c + ic];
      const int32_t f = w.weights()[(ky * g.k_w + kx) * out_c + oc];
      acc += static_cast<uint32_t>(f * (x - w.input_zero_point()));
    }
  }
  acc += static_cast<uint32_t>(w.bias()[oc]);
  return requantize_one(static_cast<int32_t>(acc), w.requantization(), oc);
}

}  // namespace

void dwconv_pixel_channels(const DwWeights& w, const DwGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox,
                           size_t c0, size_t c1, int8_t* out) {
  for (size_t c = c0; c < c1; ++c) out[c] = dw_output(w, g, in, b, oy, ox, c);
}

DwRows::DwRows(const DwGeometry& g, const int8_t* in, int8_t zero_point)
    : g_(g),
      in_(in),
      oc_(g.in_c * g.depth_multiplier),
      slots_(0),
      zero_(g.in_w * g.in_c * g.depth_multiplier + 64, zero_point) {
  if (g.depth_multiplier != 1) {
    slots_ = (g.k_h - 1) * g.dilation_h + 1;  // a window's rows are consecutive modulo this
    ring_.assign(slots_ * (g.in_w * oc_ + 64), 0);
    tags_.assign(slots_, -1);
  }
}

void DwRows::get(size_t b, size_t oy, const int8_t** rows) {
  const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g_.stride_h) - g_.pad_top;
  const size_t row_len = g_.in_w * oc_;
  for (size_t ky = 0; ky < g_.k_h; ++ky) {
    const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g_.dilation_h);
    if (iy < 0 || iy >= static_cast<ptrdiff_t>(g_.in_h)) {
      rows[ky] = zero_.data();
      continue;
    }
    const size_t index = b * g_.in_h + static_cast<size_t>(iy);
    const int8_t* src = in_ + index * g_.in_w * g_.in_c;
    if (g_.depth_multiplier == 1) {
      rows[ky] = src;
      continue;
    }
    const size_t slot = index % slots_;
    int8_t* dst = ring_.data() + slot * (row_len + 64);
    if (tags_[slot] != static_cast<ptrdiff_t>(index)) {
      const size_t m = g_.depth_multiplier, C = g_.in_c;
      for (size_t x = 0; x < g_.in_w; ++x) {
        for (size_t c = 0; c < C; ++c) {
          for (size_t j = 0; j < m; ++j) dst[(x * C + c) * m + j] = src[x * C + c];
        }
      }
      tags_[slot] = static_cast<ptrdiff_t>(index);
    }
    rows[ky] = dst;
  }
}

void qs8_dwconv2d__scalar(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  const size_t out_c = g.in_c * g.depth_multiplier;
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * out_c;
        for (size_t oc = 0; oc < out_c; ++oc) o[oc] = dw_output(w, g, in, b, oy, ox, oc);
      }
    }
  }
}

}  // namespace edgeinf::qs8
