// int8 PRELU with one alpha per channel (the last axis), as TFLite's reference kernel:
//   x = q - input_zero_point
//   out = clamp(x >= 0 ? MultiplyByQuantizedMultiplier(x, m1, s1)
//                      : MultiplyByQuantizedMultiplier(x * (alpha[c] - alpha_zero_point), m2, s2)
//               + output_zero_point, -128, 127)
// The scalar path looks each value up in its channel's 256-entry table (built at load from
// the same formula); the AVX2 path computes the formula on 8 lanes, the NEON path looks
// up the tables 8 channels at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgeinf::engine {

struct PreluParams {
  int32_t input_zero_point, output_zero_point;
  int32_t positive_multiplier, positive_shift, negative_multiplier, negative_shift;
  std::vector<int32_t> alpha;  // alpha[c] - alpha_zero_point, per channel
  std::vector<int8_t> tables;  // [channels][256], indexed by the input's byte
};

// pixels x channels values.
void prelu__scalar(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels);
void prelu__avx2(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels);
void prelu__neon(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels);
void prelu(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels);

}  // namespace edgeinf::engine
