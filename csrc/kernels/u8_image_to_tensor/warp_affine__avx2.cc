// AVX2 affine crop (warp_affine.h); bit-exact with u8_warp_affine__scalar. One pixel per
// step in 128-bit registers: its two source rows' 8-byte windows, the horizontal taps by
// VPMADDUBSW, the vertical ones by VPMADDWD, then the float stage (no FMA).
#include <immintrin.h>

#include <algorithm>

#include "warp_affine.h"

namespace edgeinf::preprocess {

void u8_warp_affine__avx2(const WarpPlan& p, const uint8_t* src, float* out, int y_begin, int y_end) {
  if (p.out_c != 3) return u8_warp_affine__scalar(p, src, out, y_begin, y_end);
  constexpr int kDrop = kWarpFracBits - kWarpWeightBits;
  constexpr int kOne = 1 << kWarpWeightBits;
  constexpr int kAhead = 2;  // output rows
  // int16 slot 2c: channel c of row 0's taps (bytes i, bpp + i), slot 2c + 1: of row 1's
  // (8 on); slots 6 and 7 zero
  alignas(16) uint8_t control[16];
  for (int k = 0; k < 16; ++k) control[k] = 0x80;
  for (int c = 0; c < 3; ++c)
    for (int row = 0; row < 2; ++row) {
      control[4 * c + 2 * row] = static_cast<uint8_t>(8 * row + p.index[c]);
      control[4 * c + 2 * row + 1] = static_cast<uint8_t>(8 * row + p.bpp + p.index[c]);
    }
  const __m128i shuffle = _mm_load_si128(reinterpret_cast<const __m128i*>(control));
  const __m128 scale = _mm_setr_ps(p.scale[0], p.scale[1], p.scale[2], 0.0f);
  const __m128 bias = _mm_setr_ps(p.bias[0], p.bias[1], p.bias[2], 0.0f);
  const int64_t row_bytes = int64_t{p.src_w} * p.bpp;
  const int64_t total = int64_t{p.out_w} * p.out_h;
  for (int y = y_begin; y < y_end; ++y) {
    float* row = out + int64_t{y} * p.out_w * 3;
    int64_t X = p.bx + int64_t{y} * p.ay, Y = p.by + int64_t{y} * p.cy;
    // A crop's rows run across the frame's rows, where the hardware prefetchers do not
    // follow: the taps of pixel x of the row kAhead below are requested with pixel x.
    int64_t ahead_x = X + kAhead * int64_t{p.ay}, ahead_y = Y + kAhead * int64_t{p.cy};
    for (int x = 0; x < p.out_w; ++x, X += p.ax, Y += p.cx, ahead_x += p.ax, ahead_y += p.cx) {
      const int64_t qx = std::clamp<int64_t>(ahead_x >> kWarpFracBits, 0, p.src_w - 1);
      const int64_t qy = std::clamp<int64_t>(ahead_y >> kWarpFracBits, 0, p.src_h - 1);
      const uint8_t* q = src + qy * p.stride + qx * p.bpp;
      __builtin_prefetch(q);
      if (qy + 1 < p.src_h) __builtin_prefetch(q + p.stride);
      const int64_t ix = X >> kWarpFracBits, iy = Y >> kWarpFracBits;
      // the 8-byte windows (both taps) inside their rows, both rows inside the image, and
      // the four-float store not past the tensor's end (it runs into the next pixel's slot)
      const bool inside =
          ix >= 0 && ix * p.bpp + 8 <= row_bytes && iy >= 0 && iy + 1 < p.src_h && int64_t{y} * p.out_w + x + 1 < total;
      if (!inside) {
        int32_t v[3];
        warp_pixel__scalar(p, src, X, Y, v);
        for (int c = 0; c < 3; ++c) row[3 * x + c] = static_cast<float>(v[c]) * p.scale[c] + p.bias[c];
        continue;
      }
      const int fx = static_cast<int>((X >> kDrop) & (kOne - 1)), fy = static_cast<int>((Y >> kDrop) & (kOne - 1));
      const uint8_t* p0 = src + iy * p.stride + ix * p.bpp;
      const __m128i window = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0)),
                                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + p.stride)));
      // negated horizontal weights as int8 (-128..0): -(w0 p0 + w1 p1) in [-32640, 0], exact
      const __m128i wx = _mm_set1_epi16(static_cast<int16_t>(((fx - kOne) & 0xff) | ((-fx & 0xff) << 8)));
      const __m128i h = _mm_maddubs_epi16(_mm_shuffle_epi8(window, shuffle), wx);
      const __m128i wy = _mm_set1_epi32((kOne - fy) | fy << 16);
      const __m128i v = _mm_sub_epi32(_mm_setzero_si128(), _mm_madd_epi16(h, wy));
      _mm_storeu_ps(row + 3 * x, _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(v), scale), bias));
    }
  }
}

}  // namespace edgeinf::preprocess
