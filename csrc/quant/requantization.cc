// The requantization parameters every int8 kernel uses: TFLite's multiplier encoding,
// the per-channel parameter set and the activation clamp.
#include "requantization.h"

#include <cassert>
#include <cmath>

namespace edgeinf::qs8 {

QuantizedMultiplier quantize_multiplier(double real_multiplier) {
  QuantizedMultiplier out;
  if (real_multiplier == 0.0) return out;
  int shift = 0;
  const double significand = std::frexp(real_multiplier, &shift);
  // std::round rounds half away from zero, as TfLiteRound does.
  int64_t q = static_cast<int64_t>(std::round(significand * static_cast<double>(int64_t{1} << 31)));
  if (q == (int64_t{1} << 31)) {
    q /= 2;
    ++shift;
  }
  if (shift < -31) {  // too small for any shift: TFLite flushes it to zero
    shift = 0;
    q = 0;
  }
  out.multiplier = static_cast<int32_t>(q);
  out.shift = shift;
  return out;
}

Requantization::Requantization(std::vector<int32_t> m, std::vector<int32_t> s, int32_t zp, int32_t lo, int32_t hi)
    : multiplier(std::move(m)), shift(std::move(s)), output_zero_point(zp), act_min(lo), act_max(hi) {
  // Preconditions, checked by the bindings (bindings/quant_arrays.h: checked_requantization).
  assert(!multiplier.empty() && multiplier.size() == shift.size());
  for (size_t c = 0; c < multiplier.size(); ++c) assert(multiplier[c] >= 0 && shift[c] >= -31 && shift[c] <= 30);
  assert(zp >= -128 && zp <= 127);
  assert(lo >= -128 && hi <= 127 && lo <= hi);
  left_shift.resize(shift.size());
  right_shift.resize(shift.size());
  for (size_t c = 0; c < shift.size(); ++c) {
    left_shift[c] = shift[c] > 0 ? shift[c] : 0;
    right_shift[c] = shift[c] > 0 ? 0 : -shift[c];
  }
}

void Requantization::pad_to(size_t n) {
  if (multiplier.size() >= n) return;
  multiplier.resize(n, 0);
  shift.resize(n, 0);
  left_shift.resize(n, 0);
  right_shift.resize(n, 0);
}

void activation_range(Activation act, float scale, int32_t zp, int32_t* act_min, int32_t* act_max) {
  // TFLite quantizes the bounds in float: round(f / scale) + zero_point.
  // The rounded value is clamped before the cast so that a tiny scale cannot overflow.
  auto quantize = [&](float f) {
    const float q = std::round(f / scale);
    return zp + static_cast<int32_t>(std::min(std::max(q, -1e6f), 1e6f));
  };
  int32_t lo = -128, hi = 127;
  switch (act) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      lo = std::max(lo, quantize(0.0f));
      break;
    case Activation::kRelu6:
      lo = std::max(lo, quantize(0.0f));
      hi = std::min(hi, quantize(6.0f));
      break;
    case Activation::kReluN1To1:
      lo = std::max(lo, quantize(-1.0f));
      hi = std::min(hi, quantize(1.0f));
      break;
  }
  *act_min = lo;
  *act_max = hi;
}

}  // namespace edgeinf::qs8
