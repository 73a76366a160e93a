// The search for the float form of the requantization (rq_params.h's FloatRequantization),
// shared by the ISAs that run it. Each ISA supplies the check, which runs the kernels'
// own instructions (rq_float__avx2.cc, rq_float__neon.cc); the search around it is here
// (rq_float.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rq_params.h"

namespace edgeinf::qs8::float_fit {

// One channel's requantization as the kernels run it.
struct Channel {
  int32_t multiplier, zero_point;
  int left_shift, right_shift;  // the left shift still to apply (0 where it is folded)
  double scale;                 // > 0: requantized in double instead (requantize_double)
};

// The path being replaced, saturated to int8, on one accumulator (portable).
int32_t reference(const Channel& ch, int64_t x);

// Whether saturate_int8(round_nearest_even(fma(float(x), scale, offset))) equals the
// ISA's fixed-point (or double) requantization of channel `ch` for every x in [x0, x1]
// (x0 <= x1, both within +-2^30), computed with the ISA's instructions; *budget is
// charged for the accumulators checked.
using Check = bool (*)(const Channel& ch, float scale, float offset, int64_t x0, int64_t x1, int64_t* budget);

// The ISAs' checks (rq_float__avx2.cc, rq_float__neon.cc), or null when the rounding mode
// is not the kernels' (round to nearest), which the checks need to round as the kernels will.
Check check__avx2();
Check check__neon();

// fit_float_requantization (rq_params.h) with `check` as the proof of each candidate.
bool fit(Check check, const Requantization& rq, const int64_t* acc_bound, size_t channels, bool left_shift_folded,
         const double* double_scale, FloatRequantization* out);

}  // namespace edgeinf::qs8::float_fit
