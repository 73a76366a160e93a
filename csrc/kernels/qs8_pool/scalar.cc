// Scalar reference pooling.
#include <algorithm>

#include "pool.h"

namespace edgeinf::qs8 {

namespace {

// Visits every output value with the input values of its clipped window: `reduce(c, taps)`
// gets the channel and a callable that feeds each window value to a functor.
template <typename Reduce>
void for_each_window(const PoolGeometry& g, const int8_t* in, int8_t* out, Reduce reduce) {
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      size_t y0, y1;
      pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        size_t x0, x1;
        pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
        const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        const int32_t count = static_cast<int32_t>((y1 - y0) * (x1 - x0));
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * g.channels;
        for (size_t c = 0; c < g.channels; ++c) {
          auto taps = [&](auto&& visit) {
            for (size_t fy = y0; fy < y1; ++fy) {
              for (size_t fx = x0; fx < x1; ++fx) {
                const size_t iy = static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy));
                const size_t ix = static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx));
                visit(static_cast<int32_t>(in[((b * g.in_h + iy) * g.in_w + ix) * g.channels + c]));
              }
            }
          };
          const int32_t value = reduce(taps, count);
          o[c] = static_cast<int8_t>(std::min(std::max(value, g.act_min), g.act_max));
        }
      }
    }
  }
}

}  // namespace

void qs8_maxpool__scalar(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  for_each_window(g, in, out, [](auto& taps, int32_t) {
    int32_t m = -128;
    taps([&](int32_t v) { m = std::max(m, v); });
    return m;
  });
}

void qs8_avgpool__scalar(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  for_each_window(g, in, out, [](auto& taps, int32_t count) {
    int32_t sum = 0;
    taps([&](int32_t v) { sum += v; });
    return average_rounded(sum, count);
  });
}

}  // namespace edgeinf::qs8
