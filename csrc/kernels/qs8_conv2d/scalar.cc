// Scalar reference conv2d: TFLite's reference_integer_ops::ConvPerChannel loop order.
#include "conv2d.h"

namespace edgeinf::qs8 {

void qs8_conv2d__scalar(const ConvWeights& cw, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const GemmWeights& w = cw.gemm();
  const int32_t zp = w.input_zero_point();
  const size_t k = g.k_h * g.k_w * g.in_c;
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * g.out_c;
        for (size_t oc = 0; oc < g.out_c; ++oc) {
          const int8_t* wc = w.weights() + oc * k;
          uint32_t acc = 0;  // int32 arithmetic with wrap-around, as compiled
          for (size_t ky = 0; ky < g.k_h; ++ky) {
            const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
            for (size_t kx = 0; kx < g.k_w; ++kx) {
              const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
              // Taps outside the image are skipped: padding contributes nothing.
              if (iy < 0 || ix < 0 || iy >= static_cast<ptrdiff_t>(g.in_h) || ix >= static_cast<ptrdiff_t>(g.in_w))
                continue;
              const int8_t* px = in + ((b * g.in_h + iy) * g.in_w + ix) * g.in_c;
              const int8_t* pw = wc + (ky * g.k_w + kx) * g.in_c;
              for (size_t ic = 0; ic < g.in_c; ++ic) {
                acc += static_cast<uint32_t>(static_cast<int32_t>(pw[ic]) * (static_cast<int32_t>(px[ic]) - zp));
              }
            }
          }
          acc += static_cast<uint32_t>(w.bias()[oc]);
          o[oc] = w.requantize(static_cast<int32_t>(acc), oc);
        }
      }
    }
  }
}

}  // namespace edgeinf::qs8
