// The pooling loop of the SIMD variants, written once: each ISA file (avx2.cc, neon.cc)
// includes it and supplies only its 16-channel blocks, so the loop is compiled with that
// file's own flags. Include only from an ISA file.
//
// A Block accumulates 16 channels of one output pixel:
//   explicit Block(const PoolGeometry&);               // per call: the clamp constants
//   void start();                                       // a new pixel's accumulators
//   void add(const int8_t* p);                          // 16 window values at p
//   void store(int8_t* o, size_t count);                // the 16 outputs (count: window size)
//   static constexpr bool kOverlapTail;                 // see below
// With kOverlapTail, channels past the last full block go through one more block ending
// at the last channel, overlapping the one before (each channel's result is its own, so
// the overlap writes equal values); without, they go through pixel_tail.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pool.h"

namespace edgeinf::qs8::pool_simd {

// Scalar outputs of one pixel for channels [c0, c1): the reference's arithmetic.
template <bool kMax>
static inline void pixel_tail(const PoolGeometry& g, const int8_t* in, size_t b, size_t oy, size_t ox, size_t c0,
                              size_t c1, int8_t* o) {
  size_t y0, y1, x0, x1;
  pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
  pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
  const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
  const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
  const int32_t count = static_cast<int32_t>((y1 - y0) * (x1 - x0));
  for (size_t c = c0; c < c1; ++c) {
    int32_t acc = kMax ? -128 : 0;
    for (size_t fy = y0; fy < y1; ++fy) {
      for (size_t fx = x0; fx < x1; ++fx) {
        const int32_t v = in[((b * g.in_h + static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy))) * g.in_w +
                              static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx))) *
                                 g.channels +
                             c];
        acc = kMax ? std::max(acc, v) : acc + v;
      }
    }
    if (!kMax) acc = average_rounded(acc, count);
    o[c] = static_cast<int8_t>(std::min(std::max(acc, g.act_min), g.act_max));
  }
}

// Max (kMax) or average pooling of the whole geometry, 16 channels per Block step.
template <bool kMax, class Block>
static inline void pool(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  const size_t C = g.channels, full = C / 16 * 16;
  Block block(g);
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      size_t y0, y1;
      pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ox = 0; ox < g.out_w; ++ox) {
        size_t x0, x1;
        pool_window(ox, g.stride_w, g.pad_left, g.filter_w, g.in_w, &x0, &x1);
        const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
        int8_t* o = out + ((b * g.out_h + oy) * g.out_w + ox) * C;
        const size_t count = (y1 - y0) * (x1 - x0);
        size_t simd_end = full;
        // the SIMD average divides in float, exact only for windows up to this size
        if (!kMax && count > kMaxSimdAverageWindow) simd_end = 0;
        const bool overlap_tail = Block::kOverlapTail && simd_end == full && full < C && C >= 16;
        for (size_t c0 = 0; c0 < simd_end || (overlap_tail && c0 < C); c0 += 16) {
          if (c0 + 16 > C) c0 = C - 16;
          block.start();
          for (size_t fy = y0; fy < y1; ++fy) {
            const size_t iy = static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(fy));
            const int8_t* row = in + ((b * g.in_h + iy) * g.in_w) * C + c0;
            for (size_t fx = x0; fx < x1; ++fx)
              block.add(row + static_cast<size_t>(ix0 + static_cast<ptrdiff_t>(fx)) * C);
          }
          block.store(o + c0, count);
        }
        if (simd_end < C && !overlap_tail) pixel_tail<kMax>(g, in, b, oy, ox, simd_end, C, o);
      }
    }
  }
}

}  // namespace edgeinf::qs8::pool_simd
