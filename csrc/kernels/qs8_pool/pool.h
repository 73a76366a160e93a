// int8 max and average pooling, NHWC, with TFLite's reference arithmetic
// (reference_integer_ops::MaxPool / AveragePool). Input and output share scale and zero
// point, so pooling works on the raw int8 values; the window is clipped to the image
// (padding is never counted), and the average rounds half away from zero:
//   (sum + count/2) / count for sum > 0, (sum - count/2) / count otherwise, C division.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgeinf::qs8 {

struct PoolGeometry {
  size_t batch, in_h, in_w, channels;
  size_t out_h, out_w;
  size_t filter_h, filter_w, stride_h, stride_w;
  ptrdiff_t pad_top, pad_left;
  int32_t act_min, act_max;
};

// The clipped window of one output coordinate: taps [start, end) of the filter.
inline void pool_window(size_t o, size_t stride, ptrdiff_t pad, size_t filter, size_t in, size_t* start, size_t* end) {
  const ptrdiff_t origin = static_cast<ptrdiff_t>(o * stride) - pad;
  const ptrdiff_t s = origin < 0 ? -origin : 0;
  const ptrdiff_t e = static_cast<ptrdiff_t>(in) - origin < static_cast<ptrdiff_t>(filter)
                          ? static_cast<ptrdiff_t>(in) - origin
                          : static_cast<ptrdiff_t>(filter);
  *start = static_cast<size_t>(s);
  *end = e > s ? static_cast<size_t>(e) : static_cast<size_t>(s);
}

// The reference's rounding division of a window sum.
inline int32_t average_rounded(int32_t sum, int32_t count) {
  return sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
}

void qs8_maxpool__scalar(const PoolGeometry& g, const int8_t* in, int8_t* out);
void qs8_maxpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out);
void qs8_maxpool__neon(const PoolGeometry& g, const int8_t* in, int8_t* out);
void qs8_maxpool(const PoolGeometry& g, const int8_t* in, int8_t* out);

// Every output window must hold at least one input value (checked by the caller).
void qs8_avgpool__scalar(const PoolGeometry& g, const int8_t* in, int8_t* out);
void qs8_avgpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out);
void qs8_avgpool__neon(const PoolGeometry& g, const int8_t* in, int8_t* out);
void qs8_avgpool(const PoolGeometry& g, const int8_t* in, int8_t* out);

// Windows of more values than this take the scalar path in the SIMD variants, whose
// float division is exact only while |sum| stays below 2^22.
constexpr size_t kMaxSimdAverageWindow = 1 << 14;

}  // namespace edgeinf::qs8
