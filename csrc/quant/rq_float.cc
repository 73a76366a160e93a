// Fitting the float form of the requantization (rq_params.h's FloatRequantization).
//
// For a channel with multiplier m, left shift l and right shift r, the fixed-point path
// gives T(x) = saturate_int8(MultiplyByQuantizedMultiplier(x) + zp). Its two roundings
// equal one (docs/int8.md): floor(x * M + 1/2 + d), M = m * 2^l / 2^(31 + r), with
// d = 2^-(r+1) for x >= 0 and -2^-(r+1) for x < 0 when r > 0, else 0. Rounded to nearest
// even, fma(float(x), M, zp + d) is that value but for float(M), the fma's rounding and
// exact ties: about 2^-16 of an output step off. So the candidates are float(M) and its
// neighbours with offsets near zp + d, and one is kept only if the ISA's check finds it
// equal to T for every accumulator from the last that saturates low to the first that
// saturates high. Beyond those, T saturates, and so does the float form: for a given sign
// of x it is monotonic, and |x * 2^l| < 2^30 keeps the shift from wrapping and the float
// result within int32.
#include "rq_float.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <utility>

namespace edgeinf::qs8::float_fit {
namespace {

// Accumulators checked per channel and per layer, at most: a layer's fit then takes a few
// milliseconds. Channels that would need more (multipliers below about 2^-11) keep the
// fixed-point form.
constexpr int64_t kMaxPointsPerChannel = int64_t{1} << 20;
constexpr int64_t kMaxPointsPerLayer = int64_t{1} << 26;
constexpr int64_t kMaxAccumulator = int64_t{1} << 30;

// The first x in [from, to] (monotonic outputs) whose output is `value` or beyond it, `to` if none.
int64_t first_reaching(const Channel& ch, int64_t from, int64_t to, int32_t value) {
  const bool up = from <= to;
  auto reached = [&](int64_t x) { return up ? reference(ch, x) >= value : reference(ch, x) <= value; };
  int64_t lo = std::min(from, to), hi = std::max(from, to);
  if (!reached(to)) return to;
  while (lo < hi) {  // the boundary between unreached and reached, searched from `from`
    const int64_t mid = up ? lo + (hi - lo) / 2 : hi - (hi - lo) / 2;
    if (reached(mid)) {
      (up ? hi : lo) = mid;
    } else {
      (up ? lo : hi) = up ? mid + 1 : mid - 1;
    }
  }
  return lo;
}

// An offset near `base` for which (scale, offset) is exact on [x0, x1], tried closest
// first; `budget` pays for the accumulators checked.
bool find_offset(Check check, const Channel& ch, float scale, double base, int64_t x0, int64_t x1, int64_t* budget,
                 float* offset) {
  if (x0 > x1) {
    *offset = static_cast<float>(base);
    return true;
  }
  static constexpr int kSteps[] = {0,  1,  -1, 2,   -2, 3,  -3,  4,  -4, 6,   -6, 8,
                                   -8, 12, 16, -16, 24, 32, -32, 48, 64, 128, 256};
  float tried[std::size(kSteps)];
  size_t n = 0;
  for (int k : kSteps) {
    const float candidate = static_cast<float>(base + std::ldexp(k, -20));
    if (std::find(tried, tried + n, candidate) != tried + n) continue;
    tried[n++] = candidate;
    if (*budget < 0) return false;
    if (check(ch, scale, candidate, x0, x1, budget)) {
      *offset = candidate;
      return true;
    }
  }
  return false;
}

// Channel c's float form, with one offset for both signs unless `split`.
bool fit_channel(Check check, const Channel& ch, int64_t bound, bool split, int64_t* budget, float* scale,
                 float* offset, float* offset_neg) {
  if (bound >= kMaxAccumulator || (bound << ch.left_shift) >= kMaxAccumulator) return false;
  bound = std::max<int64_t>(bound, 1);
  const double exact =
      ch.scale > 0 ? ch.scale : std::ldexp(static_cast<double>(ch.multiplier), ch.left_shift - 31 - ch.right_shift);
  if (bound * exact >= kMaxAccumulator) return false;
  if (exact == 0) {  // every accumulator requantizes to 0
    *scale = 0.0f;
    *offset = *offset_neg = static_cast<float>(ch.zero_point);
    return true;
  }
  // the accumulators whose outputs are not saturated, and -1 and 0 (one of each sign)
  const int64_t x0 = std::min<int64_t>(first_reaching(ch, -1, -bound, -128), -1);
  const int64_t x1 = std::max<int64_t>(first_reaching(ch, 0, bound, 127), 0);
  if (x1 - x0 + 1 > kMaxPointsPerChannel) return false;
  const double d = ch.right_shift > 0 ? std::ldexp(1.0, -ch.right_shift - 1) : 0.0;
  const float nearest = static_cast<float>(exact);
  for (int ulps : {0, 1, -1, 2, -2, 3, -3, 4, -4, 6, -6, 8, -8}) {
    float s = nearest;
    for (int i = 0; i < std::abs(ulps); ++i)
      s = std::nextafter(s, ulps > 0 ? std::numeric_limits<float>::infinity() : 0.0f);
    if (split) {
      if (find_offset(check, ch, s, ch.zero_point + d, 0, x1, budget, offset) &&
          find_offset(check, ch, s, ch.zero_point - d, x0, -1, budget, offset_neg)) {
        *scale = s;
        return true;
      }
    } else if (find_offset(check, ch, s, ch.zero_point, x0, x1, budget, offset)) {
      *scale = s;
      *offset_neg = *offset;
      return true;
    }
    if (*budget < 0) return false;
  }
  return false;
}

}  // namespace

int32_t reference(const Channel& ch, int64_t x) {
  if (ch.scale > 0)
    return static_cast<int32_t>(std::clamp<double>(std::round(x * ch.scale) + ch.zero_point, -128, 127));
  const int shift = ch.left_shift > 0 ? ch.left_shift : -ch.right_shift;
  const int32_t y = multiply_by_quantized_multiplier(static_cast<int32_t>(x), ch.multiplier, shift);
  return static_cast<int32_t>(std::clamp<int64_t>(int64_t{y} + ch.zero_point, -128, 127));
}

bool fit(Check check, const Requantization& rq, const int64_t* acc_bound, size_t channels, bool left_shift_folded,
         const double* double_scale, FloatRequantization* out) {
  // rounding half away from zero (double) or right shifts: offsets by the sign of x
  const bool split = double_scale || std::any_of(rq.right_shift.begin(), rq.right_shift.begin() + channels,
                                                 [](int32_t r) { return r > 0; });
  FloatRequantization fl;
  fl.scale.resize(channels), fl.offset.resize(channels), fl.offset_neg.resize(channels);
  int64_t budget = kMaxPointsPerLayer;
  for (size_t c = 0; c < channels; ++c) {
    const Channel ch{rq.multiplier[c], rq.output_zero_point, left_shift_folded ? 0 : rq.left_shift[c],
                     rq.right_shift[c], double_scale ? double_scale[c] : 0.0};
    if (!fit_channel(check, ch, acc_bound[c], split, &budget, &fl.scale[c], &fl.offset[c], &fl.offset_neg[c]))
      return false;
  }
  fl.split = split;
  *out = std::move(fl);
  return true;
}

}  // namespace edgeinf::qs8::float_fit

namespace edgeinf::qs8 {

bool fit_float_requantization(const Requantization& rq, const int64_t* acc_bound, size_t channels,
                              bool left_shift_folded, const double* double_scale, FloatRequantization* out) {
#if defined(EDGEINF_BUILD_AVX2)
  const float_fit::Check check = isa_supported(Isa::kAvx2) ? float_fit::check__avx2() : nullptr;
#elif defined(EDGEINF_BUILD_NEON)
  const float_fit::Check check = float_fit::check__neon();
#else
  const float_fit::Check check = nullptr;
#endif
  return check && float_fit::fit(check, rq, acc_bound, channels, left_shift_folded, double_scale, out);
}

}  // namespace edgeinf::qs8
