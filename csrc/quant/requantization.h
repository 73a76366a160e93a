// Fixed-point requantization with TFLite's reference arithmetic (gemmlowp semantics).
//
// An int8 kernel accumulates in int32 and must map the accumulator back to int8 as
// TFLite does: multiply by a real factor encoded as a Q31 multiplier and a power-of-two
// shift, with two roundings (TFLite's default "double rounding" build, which the
// ai-edge-litert wheels use): a rounding doubling high multiply, then a rounding
// arithmetic right shift. Every kernel in csrc/kernels/qs8_* goes through these helpers
// (the SIMD building blocks are avx2_inl.h and neon_inl.h beside this file), and every
// SIMD variant must give the same bits as this scalar code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace edgeinf::qs8 {

struct QuantizedMultiplier {
  int32_t multiplier = 0;  // Q31 significand in [2^30, 2^31) or 0
  int shift = 0;           // power of two: > 0 shifts left, < 0 shifts right
};

// TFLite's QuantizeMultiplier: frexp, round half away from zero into Q31, renormalize
// a significand that rounded up to 2^31, and flush factors below 2^-31 to zero.
QuantizedMultiplier quantize_multiplier(double real_multiplier);

// x * 2^s with two's-complement wrap-around, as the compiled `x * (1 << s)` behaves
// (signed overflow is undefined in C++, so it is spelled on unsigned values).
inline int32_t shift_left_wrapping(int32_t x, int s) { return static_cast<int32_t>(static_cast<uint32_t>(x) << s); }

// gemmlowp SaturatingRoundingDoublingHighMul: round(a * b / 2^31) with ties toward
// +infinity (the nudge 1 - 2^30 for negative products and C's truncating division
// make it so); the only overflow, INT32_MIN * INT32_MIN, saturates to INT32_MAX.
// This equals the ARM VQRDMULH instruction.
inline int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == b && a == std::numeric_limits<int32_t>::min()) return std::numeric_limits<int32_t>::max();
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));
}

// gemmlowp RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from
// zero. exponent is in [0, 31].
inline int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// TFLite MultiplyByQuantizedMultiplier (int32 input, double rounding): a positive
// shift is applied before the high multiply (wrapping), a negative one after it.
inline int32_t multiply_by_quantized_multiplier(int32_t x, int32_t multiplier, int shift) {
  const int left = shift > 0 ? shift : 0;
  const int right = shift > 0 ? 0 : -shift;
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shift_left_wrapping(x, left), multiplier), right);
}

// Per-channel requantization of int32 accumulators to int8:
//   out = clamp(MultiplyByQuantizedMultiplier(acc, m[c], s[c]) + zero_point, min, max).
// Arrays are per output channel; per-tensor parameters are replicated. The split
// left/right shifts are what the SIMD variants consume.
struct Requantization {
  std::vector<int32_t> multiplier;
  std::vector<int32_t> shift;
  std::vector<int32_t> left_shift;   // max(shift, 0)
  std::vector<int32_t> right_shift;  // max(-shift, 0)
  int32_t output_zero_point = 0;
  int32_t act_min = -128;
  int32_t act_max = 127;

  // Expects as many shifts as multipliers, multipliers >= 0, shifts in [-31, 30] and an
  // int8 zero point and activation range (bindings/quant_arrays.h checks untrusted ones).
  Requantization(std::vector<int32_t> multiplier, std::vector<int32_t> shift, int32_t output_zero_point,
                 int32_t act_min, int32_t act_max);
  Requantization() = default;

  size_t channels() const { return multiplier.size(); }
  // Pads every per-channel array to `n` entries (for SIMD tails) by repeating neutral values.
  void pad_to(size_t n);
};

inline int8_t requantize_one(int32_t acc, const Requantization& rq, size_t c) {
  int32_t v = multiply_by_quantized_multiplier(acc, rq.multiplier[c], rq.shift[c]);
  v += rq.output_zero_point;
  v = std::max(v, rq.act_min);
  v = std::min(v, rq.act_max);
  return static_cast<int8_t>(v);
}

// TFLite's reference FULLY_CONNECTED (since LiteRT 2.0) requantizes in double instead:
//   out = clamp(int32(round(double(acc) * scale)) + zero_point, min, max)
// with scale = double(input_scale) * double(weight_scale) / double(output_scale) and
// round() ties away from zero. The int32 conversion of an out-of-range value is what the
// CPU's conversion instruction gives (x86: INT32_MIN; Arm: saturation); the addition
// of the zero point wraps. Spelled out so that scalar and SIMD code agree.
inline int32_t double_to_int32_like_cpu(double r) {
  if (r >= -2147483648.0 && r < 2147483648.0) return static_cast<int32_t>(r);
#if defined(__aarch64__) || defined(__arm__)
  if (r != r) return 0;
  return r > 0 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int32_t>::min();
#else
  return std::numeric_limits<int32_t>::min();
#endif
}

inline int8_t requantize_double(int32_t acc, double scale, const Requantization& rq) {
  const double r = std::round(static_cast<double>(acc) * scale);
  int32_t v = static_cast<int32_t>(static_cast<uint32_t>(double_to_int32_like_cpu(r)) +
                                   static_cast<uint32_t>(rq.output_zero_point));
  v = std::max(v, rq.act_min);
  v = std::min(v, rq.act_max);
  return static_cast<int8_t>(v);
}

// Activation clamp in the output's quantized domain, as TFLite's
// CalculateActivationRangeQuantized computes it (float division, round half away).
enum class Activation : int { kNone = 0, kRelu = 1, kReluN1To1 = 2, kRelu6 = 3 };
void activation_range(Activation act, float output_scale, int32_t output_zero_point, int32_t* act_min,
                      int32_t* act_max);

}  // namespace edgeinf::qs8
