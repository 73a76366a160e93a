// Scalar reference depthwise conv2d, weight preparation and dispatch.
#include <stdexcept>
#include <string>

#include "../../dispatch.h"
#include "dwconv2d.h"

namespace edgeinf::qs8 {

DwWeights::DwWeights(const int8_t* w, size_t k_h, size_t k_w, size_t channels, const int32_t* bias,
                     int32_t input_zero_point, Requantization rq)
    : k_h_(k_h), k_w_(k_w), channels_(channels), padded_((channels + 15) / 16 * 16),
      input_zero_point_(input_zero_point), w_(w, w + k_h * k_w * channels), rq_(std::move(rq)) {
  if (k_h == 0 || k_w == 0 || channels == 0) {
    throw std::invalid_argument("depthwise filter must be non-empty, got [1, " + std::to_string(k_h) + ", " +
                                std::to_string(k_w) + ", " + std::to_string(channels) + "]");
  }
  if (input_zero_point < -128 || input_zero_point > 127) {
    throw std::invalid_argument("input zero point must be in [-128, 127], got " + std::to_string(input_zero_point));
  }
  if (rq_.channels() != channels) {
    throw std::invalid_argument("expected " + std::to_string(channels) + " requantization channels, got " +
                                std::to_string(rq_.channels()));
  }
  const size_t taps = k_h * k_w;
  w16_.assign(taps * padded_, 0);
  for (size_t t = 0; t < taps; ++t) {
    for (size_t c = 0; c < channels; ++c) w16_[t * padded_ + c] = w_[t * channels + c];
  }
  const size_t pairs = (taps + 1) / 2, blocks = padded_ / 16;
  pairs16_.assign(pairs * blocks * 32, 0);
  for (size_t p = 0; p < pairs; ++p) {
    for (size_t b = 0; b < blocks; ++b) {
      int16_t* dst = pairs16_.data() + (p * blocks + b) * 32;
      for (size_t i = 0; i < 16; ++i) {
        // unpacklo of a 256-bit register holds channels 0-3 and 8-11, unpackhi 4-7 and 12-15
        const size_t half = (i % 8) / 4, lane = (i / 8) * 4 + i % 4;
        const size_t c = b * 16 + i;
        for (size_t j = 0; j < 2; ++j) {
          const size_t t = 2 * p + j;
          dst[half * 16 + lane * 2 + j] = (t < taps && c < channels) ? w_[t * channels + c] : 0;
        }
      }
    }
  }
  bias_.assign(padded_, 0);
  bias_zp_.assign(padded_, 0);
  for (size_t c = 0; c < channels; ++c) {
    bias_[c] = bias ? bias[c] : 0;
    uint32_t sum = 0;
    for (size_t t = 0; t < taps; ++t) sum += static_cast<uint32_t>(static_cast<int32_t>(w_[t * channels + c]));
    bias_zp_[c] = static_cast<int32_t>(static_cast<uint32_t>(bias_[c]) - static_cast<uint32_t>(input_zero_point) * sum);
  }
  rq_.pad_to(padded_);
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

void qs8_dwconv2d(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using Fn = void (*)(const DwWeights&, const DwGeometry&, const int8_t*, int8_t*);
  select<Fn>(&qs8_dwconv2d__scalar, EDGEINF_AVX2(qs8_dwconv2d__avx2), EDGEINF_NEON(qs8_dwconv2d__neon),
             EDGEINF_NEON(qs8_dwconv2d__neon))(w, g, in, out);
}

}  // namespace edgeinf::qs8
