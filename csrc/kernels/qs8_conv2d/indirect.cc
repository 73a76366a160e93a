// conv2d as GEMM over an indirection buffer (portable glue; the GEMM carries the SIMD).
#include <algorithm>
#include <vector>

#include "conv2d.h"

namespace edgeinf::qs8 {

void qs8_conv2d__gemm(const GemmWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t taps = g.k_h * g.k_w;
  const size_t pixels = g.batch * g.out_h * g.out_w;
  // A padded tap reads zero points: (zero_point - zero_point) * w adds nothing, as the
  // reference's skipped taps.
  const std::vector<int8_t> padding(g.in_c, static_cast<int8_t>(w.input_zero_point()));
  // Pixels per GEMM call: bounds the indirection buffer to about 256 KB.
  const size_t chunk = std::max<size_t>(60, (32768 / taps) / 60 * 60);
  std::vector<const int8_t*> ptrs(std::min(chunk, pixels) * taps);
  // Where a pixel's window lies inside the image, its taps are the window's corner plus
  // these offsets; the corner may be anywhere from (0, 0) to (last_y, last_x).
  std::vector<size_t> tap_offset(taps);
  for (size_t ky = 0; ky < g.k_h; ++ky) {
    for (size_t kx = 0; kx < g.k_w; ++kx) {
      tap_offset[ky * g.k_w + kx] = (ky * g.dilation_h * g.in_w + kx * g.dilation_w) * g.in_c;
    }
  }
  const ptrdiff_t last_y = static_cast<ptrdiff_t>(g.in_h) - 1 - static_cast<ptrdiff_t>((g.k_h - 1) * g.dilation_h);
  const ptrdiff_t last_x = static_cast<ptrdiff_t>(g.in_w) - 1 - static_cast<ptrdiff_t>((g.k_w - 1) * g.dilation_w);
  const bool pointwise = taps == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 && g.pad_left == 0 &&
                         g.out_h == g.in_h && g.out_w == g.in_w;
  for (size_t p0 = 0; p0 < pixels; p0 += chunk) {
    const size_t count = std::min(chunk, pixels - p0);
    if (pointwise) {  // each output pixel's row is its input pixel's values
      for (size_t i = 0; i < count; ++i) ptrs[i] = in + (p0 + i) * g.in_c;
      qs8_gemm(w, GemmRows{ptrs.data(), count, 1, g.in_c, g.in_c}, out + p0 * g.out_c, g.out_c);
      continue;
    }
    // The output pixel's coordinates advance with it (no division per pixel).
    size_t ox = p0 % g.out_w, oy = (p0 / g.out_w) % g.out_h, b = p0 / (g.out_w * g.out_h);
    for (size_t i = 0; i < count; ++i) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
      const int8_t* image = in + b * g.in_h * g.in_w * g.in_c;
      const int8_t** row = ptrs.data() + i * taps;
      if (iy0 >= 0 && iy0 <= last_y && ix0 >= 0 && ix0 <= last_x) {  // the window inside the image
        const int8_t* corner = image + (static_cast<size_t>(iy0) * g.in_w + static_cast<size_t>(ix0)) * g.in_c;
        for (size_t t = 0; t < taps; ++t) row[t] = corner + tap_offset[t];
      } else {
        for (size_t ky = 0; ky < g.k_h; ++ky) {
          const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
          const bool row_inside = iy >= 0 && iy < static_cast<ptrdiff_t>(g.in_h);
          const int8_t* line = image + (row_inside ? static_cast<size_t>(iy) : 0) * g.in_w * g.in_c;
          for (size_t kx = 0; kx < g.k_w; ++kx) {
            const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
            const bool inside = row_inside && ix >= 0 && ix < static_cast<ptrdiff_t>(g.in_w);
            row[ky * g.k_w + kx] = inside ? line + static_cast<size_t>(ix) * g.in_c : padding.data();
          }
        }
      }
      if (++ox == g.out_w) {
        ox = 0;
        if (++oy == g.out_h) oy = 0, ++b;
      }
    }
    const GemmRows rows{ptrs.data(), count, taps, g.in_c};
    qs8_gemm(w, rows, out + p0 * g.out_c, g.out_c);
  }
}

}  // namespace edgeinf::qs8
