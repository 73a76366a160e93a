// The search for ADD's linear form (binary.h), proved on all 65536 input pairs.
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "binary.h"

namespace edgeinf::qs8 {
namespace {

constexpr int64_t kUnbounded = int64_t{1} << 50;  // beyond any x_coefficient * a + ...
constexpr int kMaxShift = 30;
// The coefficients are the ideal ones rounded at their resolution, then moved by up to this
// much each: the reference's own roundings and ties can ask for a neighbour.
constexpr int kNudge = 2;
constexpr int64_t kInt16Max = std::numeric_limits<int16_t>::max();

// Where the reference result of the pair (a, b) is kept.
size_t pair_index(int a, int b) { return static_cast<size_t>(a + 128) * 256 + static_cast<size_t>(b + 128); }

// The real factor from an input value to output units: its multiplier and shift, the
// left shift, and the output's multiplier and shift.
double input_factor(int32_t m, int32_t shift, const AddParams& p) {
  return std::ldexp(static_cast<double>(m), p.left_shift - 31 + shift) *
         std::ldexp(static_cast<double>(p.output_multiplier), p.output_shift - 31);
}

// The bias that makes (cx * a + cy * b + bias) >> shift give every reference result
// (up to the clamp: no lower bound where the result is act_min, no upper one where it is
// act_max), if there is one: the largest lower bound, when below the smallest upper one.
std::optional<int64_t> fit_bias(const std::array<int8_t, 65536>& want, int64_t cx, int64_t cy, int shift,
                                const AddParams& p) {
  int64_t lower = -kUnbounded, upper = kUnbounded;  // bias >= lower, bias < upper
  for (int a = -128; a < 128; ++a) {
    for (int b = -128; b < 128; ++b) {
      const int64_t t = want[pair_index(a, b)];
      const int64_t line = cx * a + cy * b;
      if (t > p.act_min) lower = std::max(lower, t * (int64_t{1} << shift) - line);
      if (t < p.act_max) upper = std::min(upper, (t + 1) * (int64_t{1} << shift) - line);
    }
    if (lower >= upper) return std::nullopt;  // most lines that miss do so early: the fit runs at load
  }
  if (lower == -kUnbounded) lower = std::min<int64_t>(upper - 1, 0);
  if (lower >= upper) return std::nullopt;
  return lower;
}

// The form at `shift` whose coefficients are multiples of 2^step (their quotients the ideal
// ones rounded, then nudged, and within int16 when `int16`), or none.
std::optional<AddLinear> fit_at(const std::array<int8_t, 65536>& want, double fx, double fy, int shift, int step,
                                bool int16, const AddParams& p) {
  const int64_t cx0 = std::llround(std::ldexp(fx, shift - step)), cy0 = std::llround(std::ldexp(fy, shift - step));
  for (int distance = 0; distance <= 2 * kNudge; ++distance) {
    // (dx, dy) in order of distance from (0, 0): |dx| + |dy| = 0, 1, 2, ...
    for (int dx = -kNudge; dx <= kNudge; ++dx) {
      for (int dy = -kNudge; dy <= kNudge; ++dy) {
        if (std::abs(dx) + std::abs(dy) != distance) continue;
        if (int16 && (std::abs(cx0 + dx) > kInt16Max || std::abs(cy0 + dy) > kInt16Max)) continue;
        const int64_t cx = (cx0 + dx) * (int64_t{1} << step), cy = (cy0 + dy) * (int64_t{1} << step);
        const std::optional<int64_t> bias = fit_bias(want, cx, cy, shift, p);
        if (!bias) continue;
        if (128 * (std::abs(cx) + std::abs(cy)) + std::abs(*bias) > std::numeric_limits<int32_t>::max()) continue;
        return AddLinear{static_cast<int32_t>(cx),
                         static_cast<int32_t>(cy),
                         static_cast<int32_t>(*bias),
                         shift,
                         p.act_min,
                         p.act_max,
                         int16 ? step : -1};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<AddLinear> fit_add_linear(const AddParams& p) {
  std::array<int8_t, 65536> want;
  for (int a = -128; a < 128; ++a) {
    for (int b = -128; b < 128; ++b) {
      want[pair_index(a, b)] = add_one(static_cast<int8_t>(a), static_cast<int8_t>(b), p);
    }
  }
  const double fx = input_factor(p.input1_multiplier, p.input1_shift, p);
  const double fy = input_factor(p.input2_multiplier, p.input2_shift, p);
  if (!std::isfinite(fx) || !std::isfinite(fy)) return std::nullopt;
  // The finer the coefficients, the more sets of reference results a line can meet: the
  // largest shift for which every value the kernel forms, about (fx * (a - za) + fy * (b -
  // zb) + zo) * 2^shift, stays below 2^31 (checked exactly below), then one coarser.
  const double reach = 256.0 * (std::abs(fx) + std::abs(fy)) + 129.0;
  int top = 0;
  while (top < kMaxShift && std::ldexp(reach, top + 1) < std::ldexp(1.0, 31)) ++top;
  // The int16 form first: the coefficients rounded at the finest resolution that keeps the
  // nudged ones within int16, 2^-step of the shift's (the bias keeps the shift's).
  const double largest = std::max(std::abs(fx), std::abs(fy));
  int finest = 0;
  while (finest < kMaxShift && std::ldexp(largest, finest + 1) + kNudge < static_cast<double>(kInt16Max)) ++finest;
  for (int shift = top; shift >= std::max(kInt16MinShift, top - 1); --shift) {
    const int step = std::max(0, shift - finest);
    if (step > kInt16MaxStep) continue;
    if (std::optional<AddLinear> f = fit_at(want, fx, fy, shift, step, true, p)) return f;
  }
  for (int shift = top; shift >= std::max(0, top - 1); --shift) {
    if (std::optional<AddLinear> f = fit_at(want, fx, fy, shift, 0, false, p)) return f;
  }
  return std::nullopt;
}

}  // namespace edgeinf::qs8
