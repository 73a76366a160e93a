// int8 logistic (sigmoid) as TFLite computes it for int8: a 256-entry table filled with
// float arithmetic (LUTPopulate: dequantize, 1 / (1 + exp(-x)), round half away, add
// the zero point, clamp), output scale 1/256 and zero point -128.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgeinf::qs8 {

// table[uint8_t(q)] is the output for input q.
void logistic_table(float input_scale, int32_t input_zero_point, int8_t table[256]);

// Applies a 256-entry int8 -> int8 table (TFLite's LUTLookup): out[i] = table[uint8(in[i])].
void qs8_lut__scalar(const int8_t* in, int8_t* out, size_t n, const int8_t table[256]);
void qs8_lut__neon(const int8_t* in, int8_t* out, size_t n, const int8_t table[256]);
void qs8_lut(const int8_t* in, int8_t* out, size_t n, const int8_t table[256]);

}  // namespace edgeinf::qs8
