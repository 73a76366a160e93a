// Affine crop to a float32 tensor: the plan (validated once per call) and the scalar
// reference, which the SIMD paths match bit for bit.
#include "warp_affine.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace edgeinf::preprocess {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

void check_side(int64_t v, const char* what) {
  if (v < 1 || v > kWarpMaxSide)
    throw std::invalid_argument(std::string(what) + " must be in [1, " + str(kWarpMaxSide) + "], got " + str(v));
}

}  // namespace

WarpPlan build_warp_plan(const WarpRequest& r) {
  check_side(r.src_w, "image width");
  check_side(r.src_h, "image height");
  check_side(r.out_w, "output width");
  check_side(r.out_h, "output height");
  if (r.bpp < 1 || r.bpp > 4) throw std::invalid_argument("bytes per pixel must be 1 to 4, got " + str(r.bpp));
  if (r.stride < int64_t{r.src_w} * r.bpp)
    throw std::invalid_argument("row stride must be at least " + str(int64_t{r.src_w} * r.bpp) + " bytes, got " +
                                str(r.stride));
  if (r.out_c != 1 && r.out_c != 3) throw std::invalid_argument("output channels must be 1 or 3, got " + str(r.out_c));
  WarpPlan p;
  p.src_w = r.src_w;
  p.src_h = r.src_h;
  p.bpp = r.bpp;
  p.stride = r.stride;
  p.out_w = r.out_w;
  p.out_h = r.out_h;
  p.out_c = r.out_c;
  for (int c = 0; c < r.out_c; ++c) {
    if (r.index[c] < 0 || r.index[c] >= r.bpp)
      throw std::invalid_argument("channel index must be in [0, " + str(r.bpp - 1) + "], got " + str(r.index[c]));
    p.index[c] = static_cast<uint8_t>(r.index[c]);
    if (!std::isfinite(r.scale[c]) || !std::isfinite(r.bias[c]))
      throw std::invalid_argument("scale and bias must be finite");
    p.scale[c] = r.scale[c] / static_cast<float>(1 << (2 * kWarpWeightBits));  // exact: a power of two
    p.bias[c] = r.bias[c];
  }
  // Every coefficient bounded, so that the fixed-point values fit their types; the corners
  // bound every output pixel's position (it is affine in x and y).
  const double one = std::ldexp(1.0, kWarpFracBits);
  for (double m : r.matrix)
    if (!std::isfinite(m) || std::fabs(m) >= static_cast<double>(kWarpMaxPosition))
      throw std::invalid_argument("the crop's matrix must be finite with |m| < " + str(kWarpMaxPosition) +
                                  " (a crop of a frame at most that far out)");
  p.ax = static_cast<int32_t>(std::llround(r.matrix[0] * one));
  p.ay = static_cast<int32_t>(std::llround(r.matrix[1] * one));
  p.bx = std::llround(r.matrix[2] * one);
  p.cx = static_cast<int32_t>(std::llround(r.matrix[3] * one));
  p.cy = static_cast<int32_t>(std::llround(r.matrix[4] * one));
  p.by = std::llround(r.matrix[5] * one);
  const int64_t limit = kWarpMaxPosition << kWarpFracBits;
  for (int64_t y : {0, r.out_h - 1})
    for (int64_t x : {0, r.out_w - 1}) {
      const int64_t X = p.bx + x * p.ax + y * p.ay, Y = p.by + x * p.cx + y * p.cy;
      if (X <= -limit || X >= limit || Y <= -limit || Y >= limit)
        throw std::invalid_argument("the crop reaches source position (" + str(X >> kWarpFracBits) + ", " +
                                    str(Y >> kWarpFracBits) + "), farther than " + str(kWarpMaxPosition) +
                                    " pixels from the origin");
    }
  return p;
}

void u8_warp_affine__scalar(const WarpPlan& p, const uint8_t* src, float* out, int y_begin, int y_end) {
  for (int y = y_begin; y < y_end; ++y) {
    float* row = out + int64_t{y} * p.out_w * p.out_c;
    for (int x = 0; x < p.out_w; ++x) {
      int32_t v[3];
      warp_pixel__scalar(p, src, p.bx + int64_t{x} * p.ax + int64_t{y} * p.ay,
                         p.by + int64_t{x} * p.cx + int64_t{y} * p.cy, v);
      for (int c = 0; c < p.out_c; ++c) row[x * p.out_c + c] = static_cast<float>(v[c]) * p.scale[c] + p.bias[c];
    }
  }
}

}  // namespace edgeinf::preprocess
