// int8 softmax with TFLite's reference kernel arithmetic (reference_ops::Softmax with
// gemmlowp fixed point), output scale 1/256 and zero point -128.
//
// The scalar path is the reference algorithm itself. The other paths are table driven:
// a scaled difference to the row maximum takes only 256 values, so exp() of each and
// its contribution to the sum are tabulated once per call with the very same fixed-point
// functions, which gives the same bits far faster.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgeinf::qs8 {

struct SoftmaxParams {
  int32_t input_multiplier;  // beta * input_scale in Q5.26 steps, as a Q31 multiplier
  int32_t input_left_shift;
  int32_t diff_min;  // differences below this give exactly zero probability
};

// TFLite's SoftmaxPrepare for int8 (PreprocessSoftmaxScaling, CalculateInputRadius).
// Throws std::invalid_argument when beta * input_scale is too small to be represented.
SoftmaxParams softmax_params(float input_scale, float beta);

// `rows` rows of `depth` values each.
void qs8_softmax__scalar(const int8_t* in, int8_t* out, size_t rows, size_t depth, const SoftmaxParams& p);
void qs8_softmax__table(const int8_t* in, int8_t* out, size_t rows, size_t depth, const SoftmaxParams& p);
void qs8_softmax(const int8_t* in, int8_t* out, size_t rows, size_t depth, const SoftmaxParams& p);

namespace fixedpoint {
// gemmlowp: exp(a) for a <= 0 given in Q5.26, result in Q0.31.
int32_t exp_on_negative_values_q5(int32_t a);
// gemmlowp via TFLite's GetReciprocal: 1 / x for x in Q12.19, as a Q0.31 mantissa and
// the number of bits of x above one.
int32_t reciprocal_q12(int32_t x, int* num_bits_over_unit);
}  // namespace fixedpoint

}  // namespace edgeinf::qs8
