// int8 elementwise add and mul with TFLite's reference arithmetic
// (reference_integer_ops::AddFunc / MulElementwise), on equal-length operands.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "../../quant/requantization.h"

namespace edgeinf::qs8 {

// ADD: both inputs are moved to a common scale (left shift 20, then a multiplier below
// one each), summed, and the sum requantized to the output.
struct AddParams {
  int32_t input1_offset, input2_offset;                                      // minus the zero points
  int32_t left_shift;                                                        // 20 for int8
  int32_t input1_multiplier, input1_shift, input2_multiplier, input2_shift;  // shifts <= 0
  int32_t output_multiplier, output_shift;                                   // shift <= 0
  int32_t output_offset, act_min, act_max;
};

// MUL: the product of the offset inputs, requantized.
struct MulParams {
  int32_t input1_offset, input2_offset;
  int32_t output_multiplier, output_shift;
  int32_t output_offset, act_min, act_max;
};

inline int8_t add_one(int8_t x, int8_t y, const AddParams& p) {
  const int32_t a = shift_left_wrapping(p.input1_offset + x, p.left_shift);
  const int32_t b = shift_left_wrapping(p.input2_offset + y, p.left_shift);
  const int32_t sa = multiply_by_quantized_multiplier(a, p.input1_multiplier, p.input1_shift);
  const int32_t sb = multiply_by_quantized_multiplier(b, p.input2_multiplier, p.input2_shift);
  const int32_t raw = multiply_by_quantized_multiplier(sa + sb, p.output_multiplier, p.output_shift) + p.output_offset;
  return static_cast<int8_t>(std::min(p.act_max, std::max(p.act_min, raw)));
}

inline int8_t mul_one(int8_t x, int8_t y, const MulParams& p) {
  const int32_t prod = (p.input1_offset + x) * (p.input2_offset + y);
  const int32_t raw = multiply_by_quantized_multiplier(prod, p.output_multiplier, p.output_shift) + p.output_offset;
  return static_cast<int8_t>(std::min(p.act_max, std::max(p.act_min, raw)));
}

void qs8_add__scalar(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p);
void qs8_add__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p);
void qs8_add__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p);
void qs8_add(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p);

// ADD as one linear form of the raw int8 inputs, where that is exact:
//   out = clamp((x_coefficient * a + y_coefficient * b + bias) >> shift, act_min, act_max)
// (an arithmetic shift: the floor). fit_add_linear() finds one that equals add_one() on
// all 65536 input pairs, checked on every pair, or none; every |x_coefficient * a +
// y_coefficient * b + bias| is below 2^31. Two multiplies and a shift per value instead of
// the reference's three fixed-point rescalings.
//
// Two forms. The int16 form (int16_step >= 0, tried first): both coefficients are int16
// values times 2^int16_step, int16_step <= kInt16MaxStep and shift >= kInt16MinShift, so
// the products come from int16 lanes (the inputs shifted left by int16_step, or the bias
// and the shift divided by 2^int16_step: floor((v * 2^k + bias) / 2^s) = floor((v +
// floor(bias / 2^k)) / 2^(s - k)) for integer v). The int32 form (int16_step = -1), finer,
// where the int16 one is not exact: int32 coefficients.
struct AddLinear {
  int32_t x_coefficient, y_coefficient, bias, shift;
  int32_t act_min, act_max;
  int32_t int16_step;
  bool is_int16() const { return int16_step >= 0; }
  int16_t x_int16() const { return static_cast<int16_t>(x_coefficient >> int16_step); }
  int16_t y_int16() const { return static_cast<int16_t>(y_coefficient >> int16_step); }
};
// The int32 form's coefficients split at 2^16 for products of int16 lanes: c = high * 2^16 +
// low, low the signed low half (|high| < 2^9 as |c| < 2^24).
struct SplitCoefficients {
  int16_t x_low, y_low, x_high, y_high;
  explicit SplitCoefficients(const AddLinear& f)
      : x_low(static_cast<int16_t>(f.x_coefficient & 0xFFFF)),
        y_low(static_cast<int16_t>(f.y_coefficient & 0xFFFF)),
        x_high(static_cast<int16_t>((f.x_coefficient - x_low) / 65536)),
        y_high(static_cast<int16_t>((f.y_coefficient - y_low) / 65536)) {}
};

// x and y as the int16 halves of an int32, x in the low one: a coefficient pair for x86's
// VPMADDWD on (a, b) pairs.
inline int32_t int16_pair(int16_t x, int16_t y) {
  return static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint16_t>(y)) << 16) | static_cast<uint16_t>(x));
}
constexpr int kInt16MaxStep = 8;    // NEON's widening shift of int8 lanes takes 0 to 8
constexpr int kInt16MinShift = 16;  // NEON's ADDHN divides by 2^16 on the way

std::optional<AddLinear> fit_add_linear(const AddParams& p);

// ADD with its parameters and, where one is exact, its linear form (fit once, at load).
struct PreparedAdd {
  AddParams params;
  std::optional<AddLinear> linear;
#if defined(EDGEINF_BUILD_AVX2) || defined(EDGEINF_BUILD_NEON)
  explicit PreparedAdd(const AddParams& p) : params(p), linear(fit_add_linear(p)) {}
#else
  // Only the AVX2 and NEON kernels run the form: a build without them skips the fit at load.
  explicit PreparedAdd(const AddParams& p) : params(p) {}
#endif
};

void qs8_add_linear__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f);
void qs8_add_linear__avx512(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f);
void qs8_add_linear__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f);
// The linear form on the AVX2, AVX-512 and NEON paths, the reference arithmetic of
// `params` on the scalar path (the results are the same).
void qs8_add_prepared(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const PreparedAdd& add);

void qs8_mul__scalar(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p);
void qs8_mul__avx2(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p);
void qs8_mul__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p);
void qs8_mul(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p);

}  // namespace edgeinf::qs8
