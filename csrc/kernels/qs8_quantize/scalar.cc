// Scalar reference of quantize / dequantize.
#include "../../dispatch.h"
#include "quantize.h"

namespace edgeinf::qs8 {

void qs8_quantize__scalar(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point) {
  for (size_t i = 0; i < n; ++i) q[i] = quantize_one(x[i], scale, zero_point);
}

void qs8_dequantize__scalar(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point) {
  for (size_t i = 0; i < n; ++i) x[i] = dequantize_one(q[i], scale, zero_point);
}

void qs8_quantize(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point) {
  using Fn = void (*)(const float*, int8_t*, size_t, float, int32_t);
  select<Fn>(&qs8_quantize__scalar, EDGEINF_AVX2(qs8_quantize__avx2), EDGEINF_NEON(qs8_quantize__neon),
             EDGEINF_NEON(qs8_quantize__neon))(x, q, n, scale, zero_point);
}

void qs8_dequantize(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point) {
  using Fn = void (*)(const int8_t*, float*, size_t, float, int32_t);
  select<Fn>(&qs8_dequantize__scalar, EDGEINF_AVX2(qs8_dequantize__avx2), EDGEINF_NEON(qs8_dequantize__neon),
             EDGEINF_NEON(qs8_dequantize__neon))(q, x, n, scale, zero_point);
}

}  // namespace edgeinf::qs8
