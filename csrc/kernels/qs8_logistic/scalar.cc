// Scalar reference of the logistic table and of table lookup. (AVX2 has no
// byte table lookup wider than 16 entries; the scalar loop serves that path.)
#include <algorithm>
#include <cmath>

#include "logistic.h"

namespace edgeinf::qs8 {

void logistic_table(float input_scale, int32_t input_zero_point, int8_t table[256]) {
  const float output_scale = 1.0f / 256;
  const int32_t output_zero_point = -128;
  const float inverse_scale = 1 / output_scale;
  for (int32_t v = -128; v <= 127; ++v) {
    const float dequantized = input_scale * static_cast<float>(v - input_zero_point);
    const float transformed = 1.0f / (1.0f + std::exp(-dequantized));
    const float rescaled = std::round(transformed * inverse_scale);
    const int32_t quantized = static_cast<int32_t>(rescaled + static_cast<float>(output_zero_point));
    table[static_cast<uint8_t>(static_cast<int8_t>(v))] = static_cast<int8_t>(std::max(std::min(127, quantized), -128));
  }
}

void qs8_lut__scalar(const int8_t* in, int8_t* out, size_t n, const int8_t table[256]) {
  for (size_t i = 0; i < n; ++i) out[i] = table[static_cast<uint8_t>(in[i])];
}

}  // namespace edgeinf::qs8
