// An 8-bit packed image's affine crop (e.g. a face's rotated square) straight into a
// float32 tensor: bilinear resampling, channel selection and normalization in one pass.
//
// Output pixel (x, y) samples the source at (X, Y) = (bx + x * ax + y * ay,
// by + x * cx + y * cy), the inverse map, in fixed point of 1/2^16 pixel: integer
// arithmetic only, so every ISA computes the same positions. A tap outside the image
// reads 0 (a black border, as OpenCV's BORDER_CONSTANT). The bilinear weights have 7
// bits per axis (1/128 pixel); the weighted sum v (in 1/2^14 levels) becomes
// float(v) * scale[c] + bias[c], one multiply and one add, so every ISA gives the same bits.
#pragma once

#include <array>
#include <cstdint>

namespace edgeinf::preprocess {

constexpr int kWarpFracBits = 16;              // source positions in 1/2^16 pixel
constexpr int kWarpWeightBits = 7;             // bilinear weights per axis in 1/128
constexpr int64_t kWarpMaxPosition = 1 << 14;  // |X|, |Y| bound in pixels: positions fit int32
constexpr int kWarpMaxSide = 8192;             // image and output sides

struct WarpPlan {
  int src_w = 0, src_h = 0, bpp = 3;  // bpp: bytes per source pixel, 1..4
  int64_t stride = 0;                 // bytes between source rows (>= src_w * bpp)
  int out_w = 0, out_h = 0, out_c = 3;
  int32_t ax = 0, ay = 0, cx = 0, cy = 0;  // the map's linear part, 1/2^16
  int64_t bx = 0, by = 0;                  // its offset, 1/2^16
  std::array<uint8_t, 3> index{};          // byte of the source pixel read for output channel c
  std::array<float, 3> scale{}, bias{};    // out = float(v) * scale[c] + bias[c]
};

struct WarpRequest {
  int src_w, src_h, bpp;
  int64_t stride;
  int out_w, out_h, out_c;
  std::array<double, 6> matrix;  // output pixel -> source position: x' = m0 x + m1 y + m2, y' = m3 x + m4 y + m5
  std::array<int, 3> index;
  std::array<float, 3> scale, bias;  // per output channel, on pixel levels
};

// Validates the request (sizes, channel indices, every output pixel's source position
// within kWarpMaxPosition); throws std::invalid_argument naming what was expected.
WarpPlan build_warp_plan(const WarpRequest& request);

// Output rows [y_begin, y_end) into out (out_h x out_w x out_c float32, contiguous).
void u8_warp_affine__scalar(const WarpPlan& plan, const uint8_t* src, float* out, int y_begin, int y_end);
void u8_warp_affine__avx2(const WarpPlan& plan, const uint8_t* src, float* out, int y_begin, int y_end);
// The active path's variant (kernels/dispatch.cc).
void u8_warp_affine(const WarpPlan& plan, const uint8_t* src, float* out);

// The scalar value of one output pixel, for SIMD paths' edges: v of each channel.
inline void warp_pixel__scalar(const WarpPlan& p, const uint8_t* src, int64_t X, int64_t Y, int32_t v[3]) {
  constexpr int kDrop = kWarpFracBits - kWarpWeightBits;
  constexpr int kOne = 1 << kWarpWeightBits;
  // >> of a negative value is floor (arithmetic shift) with GCC and Clang, as in SIMD
  const int64_t ix = X >> kWarpFracBits, iy = Y >> kWarpFracBits;
  const int32_t fx = static_cast<int32_t>((X >> kDrop) & (kOne - 1));
  const int32_t fy = static_cast<int32_t>((Y >> kDrop) & (kOne - 1));
  const int32_t w[4] = {(kOne - fx) * (kOne - fy), fx * (kOne - fy), (kOne - fx) * fy, fx * fy};
  for (int c = 0; c < p.out_c; ++c) v[c] = 0;
  for (int t = 0; t < 4; ++t) {
    const int64_t tx = ix + (t & 1), ty = iy + (t >> 1);
    if (tx < 0 || ty < 0 || tx >= p.src_w || ty >= p.src_h) continue;
    const uint8_t* px = src + ty * p.stride + tx * p.bpp;
    for (int c = 0; c < p.out_c; ++c) v[c] += w[t] * px[p.index[c]];
  }
}

}  // namespace edgeinf::preprocess
