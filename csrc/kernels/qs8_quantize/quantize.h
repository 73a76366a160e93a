// float32 <-> int8 affine quantization with TFLite's QUANTIZE / DEQUANTIZE arithmetic.
//
// quantize:   q = clamp(round_half_away(x / scale) + zero_point, -128, 127), the division
//             done in float32 as TFLite's AffineQuantize does. A NaN maps to the zero point
//             and values beyond int32 saturate (TFLite's behaviour there is undefined).
// dequantize: x = float(scale * (q - zero_point)); the double product is exact, so one
//             float32 multiplication gives the same bits.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace edgeinf::qs8 {

void qs8_quantize__scalar(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point);
void qs8_quantize__avx2(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point);
void qs8_quantize__neon(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point);
void qs8_quantize(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point);

void qs8_dequantize__scalar(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point);
void qs8_dequantize__avx2(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point);
void qs8_dequantize__neon(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point);
void qs8_dequantize(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point);

// Scalar helper shared by the SIMD tails.
inline int8_t quantize_one(float x, float scale, int32_t zero_point) {
  const float r = std::round(x / scale);  // TfLiteRound: ties away from zero
  if (!(r == r)) return static_cast<int8_t>(zero_point);
  const float lo = static_cast<float>(-128 - zero_point), hi = static_cast<float>(127 - zero_point);
  const float clamped = r < lo ? lo : (r > hi ? hi : r);
  return static_cast<int8_t>(static_cast<int32_t>(clamped) + zero_point);
}

inline float dequantize_one(int8_t q, float scale, int32_t zero_point) {
  return scale * static_cast<float>(static_cast<int32_t>(q) - zero_point);
}

}  // namespace edgeinf::qs8
