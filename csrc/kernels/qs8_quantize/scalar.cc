// Scalar reference of quantize / dequantize.
#include "quantize.h"

namespace edgeinf::qs8 {

void qs8_quantize__scalar(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point) {
  for (size_t i = 0; i < n; ++i) q[i] = quantize_one(x[i], scale, zero_point);
}

void qs8_dequantize__scalar(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point) {
  for (size_t i = 0; i < n; ++i) x[i] = dequantize_one(q[i], scale, zero_point);
}

}  // namespace edgeinf::qs8
