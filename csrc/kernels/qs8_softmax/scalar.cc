// Scalar reference softmax: gemmlowp's fixed-point exp and reciprocal, step by step as
// TFLite's reference_ops::Softmax does them; plus parameters.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "../../quant/requantization.h"
#include "softmax.h"

namespace edgeinf::qs8 {
namespace fixedpoint {
namespace {

// FixedPoint multiplication: the raw values' rounding doubling high product.
inline int32_t mul(int32_t a, int32_t b) { return saturating_rounding_doubling_high_mul(a, b); }
// FixedPoint addition / subtraction wrap (gemmlowp's Add/Sub on int32).
inline int32_t add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
inline int32_t sub(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) - static_cast<uint32_t>(b));
}

// SaturatingRoundingMultiplyByPOT with a positive exponent: a saturating left shift.
inline int32_t saturating_shift_left(int32_t x, int exponent) {
  const int32_t threshold = static_cast<int32_t>((int64_t{1} << (31 - exponent)) - 1);
  if (x > threshold) return std::numeric_limits<int32_t>::max();
  if (x < -threshold) return std::numeric_limits<int32_t>::min();
  return shift_left_wrapping(x, exponent);
}

// RoundingHalfSum: (a + b) / 2 rounded half away from zero, in 64 bits.
inline int32_t rounding_half_sum(int32_t a, int32_t b) {
  const int64_t sum = static_cast<int64_t>(a) + b;
  return static_cast<int32_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
}

// exp(a) for a in [-1/4, 0), Q0.31: Taylor expansion around -1/8.
int32_t exp_on_interval_between_negative_one_quarter_and_0_excl(int32_t a) {
  const int32_t constant_term = 1895147668;     // exp(-1/8)
  const int32_t constant_1_over_3 = 715827883;  // 1/3
  const int32_t x = add(a, int32_t{1} << 28);   // a + 1/8
  const int32_t x2 = mul(x, x);
  const int32_t x3 = mul(x2, x);
  const int32_t x4 = mul(x2, x2);
  const int32_t x4_over_4 = rounding_divide_by_pot(x4, 2);
  const int32_t poly = rounding_divide_by_pot(add(mul(add(x4_over_4, x3), constant_1_over_3), x2), 1);
  return add(constant_term, mul(constant_term, add(x, poly)));
}

}  // namespace

int32_t exp_on_negative_values_q5(int32_t a) {
  constexpr int kIntegerBits = 5, kFractionalBits = 31 - kIntegerBits;
  const int32_t one_quarter = int32_t{1} << (kFractionalBits - 2);
  const int32_t mask = one_quarter - 1;
  const int32_t a_mod_quarter_minus_one_quarter = sub(a & mask, one_quarter);
  // Rescale<0> of a Q5.26 value: a saturating left shift by 5.
  int32_t result = exp_on_interval_between_negative_one_quarter_and_0_excl(
      saturating_shift_left(a_mod_quarter_minus_one_quarter, kIntegerBits));
  const int32_t remainder = sub(a_mod_quarter_minus_one_quarter, a);
  // Barrel shifter: exp(-2^e) factors for each set bit of the remainder.
  struct Factor {
    int exponent;
    int32_t multiplier;
  };
  static constexpr Factor kFactors[] = {{-2, 1672461947}, {-1, 1302514674}, {0, 790015084}, {1, 290630308},
                                        {2, 39332535},    {3, 720401},      {4, 242}};
  for (const Factor& f : kFactors) {
    if (kIntegerBits > f.exponent && (remainder & (int32_t{1} << (kFractionalBits + f.exponent)))) {
      result = mul(result, f.multiplier);
    }
  }
  // (gemmlowp clamps inputs below -32 only when kIntegerBits > 5.)
  if (a == 0) result = std::numeric_limits<int32_t>::max();  // exp(0) = One()
  return result;
}

int32_t reciprocal_q12(int32_t x, int* num_bits_over_unit) {
  const uint32_t ux = static_cast<uint32_t>(x);
  const int headroom_plus_one = ux == 0 ? 32 : __builtin_clz(ux);
  *num_bits_over_unit = 12 - headroom_plus_one;
  const uint32_t normalized = headroom_plus_one == 32 ? 0 : ux << headroom_plus_one;
  const int32_t a = static_cast<int32_t>(normalized - (uint32_t{1} << 31));
  // one_over_one_plus_x_for_x_in_0_1: Newton-Raphson in Q2.29.
  const int32_t half_denominator = rounding_half_sum(a, std::numeric_limits<int32_t>::max());
  const int32_t constant_48_over_17 = 1515870810, constant_neg_32_over_17 = -1010580540;
  const int32_t one_q2 = int32_t{1} << 29;
  int32_t r = add(constant_48_over_17, mul(half_denominator, constant_neg_32_over_17));
  for (int i = 0; i < 3; ++i) {
    const int32_t half_denominator_times_r = mul(half_denominator, r);
    const int32_t one_minus = sub(one_q2, half_denominator_times_r);
    r = add(r, saturating_shift_left(mul(r, one_minus), 2));  // Q4.27 -> Q2.29
  }
  return saturating_shift_left(r, 1);  // x/2 in Q1.30 -> Q0.31
}

}  // namespace fixedpoint

SoftmaxParams softmax_params(float input_scale, float beta) {
  constexpr int kScaledDiffIntegerBits = 5;
  const double max_real = static_cast<double>((int64_t{1} << 31) - 1);
  const double real = std::min(static_cast<double>(beta) * static_cast<double>(input_scale) *
                                   static_cast<double>(int64_t{1} << (31 - kScaledDiffIntegerBits)),
                               max_real);
  if (!(real > 1.0)) {
    throw std::invalid_argument("softmax: beta * input_scale must exceed 2^-26, got " +
                                std::to_string(static_cast<double>(beta) * input_scale));
  }
  const QuantizedMultiplier q = quantize_multiplier(real);
  SoftmaxParams p;
  p.input_multiplier = q.multiplier;
  p.input_left_shift = q.shift;
  const double radius = 1.0 * ((1 << kScaledDiffIntegerBits) - 1) *
                        static_cast<double>(int64_t{1} << (31 - kScaledDiffIntegerBits)) /
                        static_cast<double>(int64_t{1} << q.shift);
  p.diff_min = -static_cast<int32_t>(std::floor(radius));
  return p;
}

void qs8_softmax__scalar(const int8_t* in, int8_t* out, size_t rows, size_t depth, const SoftmaxParams& p) {
  for (size_t r = 0; r < rows; ++r) {
    const int8_t* x = in + r * depth;
    int8_t* y = out + r * depth;
    int32_t max_in_row = -128;
    for (size_t c = 0; c < depth; ++c) max_in_row = std::max<int32_t>(max_in_row, x[c]);
    auto scaled_exp = [&](int32_t diff) {
      // MultiplyByQuantizedMultiplierGreaterThanOne: shift, then the high multiply
      const int32_t rescaled =
          saturating_rounding_doubling_high_mul(shift_left_wrapping(diff, p.input_left_shift), p.input_multiplier);
      return fixedpoint::exp_on_negative_values_q5(rescaled);
    };
    uint32_t sum_of_exps = 0;  // Q12.19, wrapping adds
    for (size_t c = 0; c < depth; ++c) {
      const int32_t diff = x[c] - max_in_row;
      if (diff >= p.diff_min) sum_of_exps += static_cast<uint32_t>(rounding_divide_by_pot(scaled_exp(diff), 12));
    }
    int num_bits_over_unit = 0;
    const int32_t shifted_scale = fixedpoint::reciprocal_q12(static_cast<int32_t>(sum_of_exps), &num_bits_over_unit);
    const int exponent = num_bits_over_unit + 31 - 8;
    for (size_t c = 0; c < depth; ++c) {
      const int32_t diff = x[c] - max_in_row;
      int32_t v = -128;
      if (diff >= p.diff_min) {
        const int32_t unsat =
            rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted_scale, scaled_exp(diff)), exponent);
        v = std::min(std::max(unsat - 128, -128), 127);
      }
      y[c] = static_cast<int8_t>(v);
    }
  }
}

}  // namespace edgeinf::qs8
