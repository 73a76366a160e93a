// A 1x1 convolution to very few output channels (1 to 4): the face detectors' score heads.
// The convolution kernels work on blocks of 16 output channels, so such a layer wastes
// most of each block; here each channel's dot products run over 8 pixels at once (8 lanes,
// one per pixel), so every lane of the requantization is a real output. Each channel then
// pays its own pass over the inputs and its own reduction: measured on Zen 3 this path
// wins up to 4 channels (2.5x at one, 1.2x at four) and loses from about 6.
//
//   out[p][c] = requantize( bias[c] + sum_k w[c][k] * (in[p][k] - input_zero_point) )
//
// with the accumulator started at bias - zero_point * sum(w) (GemmWeights' zero-point
// terms) and the sum wrapping modulo 2^32 like the reference's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "../kernels/qs8_gemm/gemm.h"

namespace edgeinf::engine {

class NarrowPointwise {
 public:
  static constexpr size_t kMaxChannels = 4;
  static constexpr size_t kMinDepth = 16;  // K: the last 16-value block may overlap the one before

  // Whether a layer of n output channels and K input values per pixel (a 1x1 filter)
  // takes this path: few channels, K at least one block, fixed-point requantization, and
  // a path that runs the AVX2 kernel (AVX2, AVX-VNNI, AVX-512 VNNI; elsewhere the
  // convolution kernels' own paths are faster than this one's scalar reference). On the
  // VPDPBUSD paths the GEMM too computes 16 channels per block (measured on Zen 5: 6x
  // slower than this kernel on the full-range detector's one-channel head).
  static bool applies(const qs8::GemmWeights& w);

  explicit NarrowPointwise(const qs8::GemmWeights& w);

  const qs8::GemmWeights& weights() const { return w_; }
  size_t blocks() const { return blocks_; }
  // Weights as int16 [n][blocks][16]: block b covers K values [start(b), start(b) + 16);
  // the last block starts at K - 16 with the values the one before covered zeroed.
  const int16_t* panel() const { return panel_.data(); }
  size_t block_start(size_t b) const { return b + 1 < blocks_ ? b * 16 : w_.k() - 16; }

 private:
  const qs8::GemmWeights& w_;
  size_t blocks_;
  std::vector<int16_t> panel_;
};

// `pixels` output pixels: pixel p's K input values start at in + p * in_stride, its n
// outputs at out + p * n.
void narrow_pointwise__scalar(const NarrowPointwise& w, const int8_t* in, size_t in_stride, size_t pixels, int8_t* out);
void narrow_pointwise__avx2(const NarrowPointwise& w, const int8_t* in, size_t in_stride, size_t pixels, int8_t* out);
void narrow_pointwise(const NarrowPointwise& w, const int8_t* in, size_t in_stride, size_t pixels, int8_t* out);

}  // namespace edgeinf::engine
