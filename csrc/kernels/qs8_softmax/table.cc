// Table-driven softmax for the SIMD kernel paths (portable C++, bit-exact with the
// scalar reference): exp of each possible difference to the row maximum is computed once.
#include <algorithm>
#include <cstring>

#include "../../quant/requantization.h"
#include "softmax.h"

namespace edgeinf::qs8 {

void qs8_softmax__table(const int8_t* in, int8_t* out, size_t rows, size_t depth, const SoftmaxParams& p) {
  // exp_q31[d] and its Q12.19 contribution for a difference of -d, zero below diff_min
  // (those neither count in the sum nor produce more than -128, as in the reference).
  int32_t exp_q31[256], term_q12[256];
  for (int d = 0; d < 256; ++d) {
    const int32_t diff = -d;
    if (diff >= p.diff_min) {
      const int32_t rescaled =
          saturating_rounding_doubling_high_mul(shift_left_wrapping(diff, p.input_left_shift), p.input_multiplier);
      exp_q31[d] = fixedpoint::exp_on_negative_values_q5(rescaled);
      term_q12[d] = rounding_divide_by_pot(exp_q31[d], 12);
    } else {
      exp_q31[d] = 0;
      term_q12[d] = 0;
    }
  }
  int8_t out_table[256];
  for (size_t r = 0; r < rows; ++r) {
    const int8_t* x = in + r * depth;
    int8_t* y = out + r * depth;
    int32_t max_in_row = -128;
    for (size_t c = 0; c < depth; ++c) max_in_row = std::max<int32_t>(max_in_row, x[c]);
    uint32_t sum = 0;
    for (size_t c = 0; c < depth; ++c) sum += static_cast<uint32_t>(term_q12[max_in_row - x[c]]);
    int num_bits_over_unit = 0;
    const int32_t shifted_scale = fixedpoint::reciprocal_q12(static_cast<int32_t>(sum), &num_bits_over_unit);
    const int exponent = num_bits_over_unit + 31 - 8;
    const int span = max_in_row + 129;  // differences 0 .. max + 128 occur
    auto output = [&](int d) {
      const int32_t unsat =
          rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted_scale, exp_q31[d]), exponent);
      return static_cast<int8_t>(std::min(std::max(unsat - 128, -128), 127));
    };
    if (depth > static_cast<size_t>(span)) {
      for (int d = 0; d < span; ++d) out_table[d] = output(d);
      for (size_t c = 0; c < depth; ++c) y[c] = out_table[max_in_row - x[c]];
    } else {
      for (size_t c = 0; c < depth; ++c) y[c] = output(max_in_row - x[c]);
    }
  }
}

}  // namespace edgeinf::qs8
