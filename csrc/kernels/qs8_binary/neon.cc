// NEON add / mul: 16 values per step, bit-exact with the reference of binary.h.
//
// ADD with the parameters TFLite gives int8 (left shift 20, input shifts <= 0, the input of
// the larger scale at exactly 1/2) takes a short form: (x + offset) << 20 made from int16
// lanes, that 1/2 as a shift, and each rounding right shift in two instructions. Other
// parameters take every step of the reference on int32 lanes.
#include <arm_neon.h>

#include <algorithm>

#include "../../quant/neon_inl.h"
#include "binary.h"

namespace edgeinf::qs8 {
namespace {

constexpr int32_t kHalfMultiplier = int32_t{1} << 30;  // with shift 0: a factor of exactly 1/2

// A multiply_by_quantized_multiplier: any shift, or a right shift of at least one bit
// (kRightOnly), which needs neither the left shift nor the saturating fix-up.
template <bool kRightOnly>
struct Scale {
  int32x4_t multiplier, left, neg_right;
  Scale(int32_t m, int32_t shift)
      : multiplier(vdupq_n_s32(m)),
        left(vdupq_n_s32(shift > 0 ? shift : 0)),
        neg_right(vdupq_n_s32(shift > 0 ? 0 : shift)) {}
  int32x4_t apply(int32x4_t x) const {
    if (kRightOnly) return neon::mbqm_right(x, multiplier, neg_right);
    return neon::mbqm(x, multiplier, left, neg_right);
  }
};

// The reference's last step on 16 results: plus the output zero point, clamped. The sums
// are narrowed with saturation first: a value beyond int16 is beyond int8 after the zero
// point is added (|zero point| <= 128), so it clamps to the same bound.
struct Output {
  int16x8_t zero_point;
  int8x16_t lo, hi;
  explicit Output(int32_t zp, int32_t act_min, int32_t act_max)
      : zero_point(vdupq_n_s16(static_cast<int16_t>(zp))),
        lo(vdupq_n_s8(static_cast<int8_t>(act_min))),
        hi(vdupq_n_s8(static_cast<int8_t>(act_max))) {}
  int8x16_t operator()(const int32x4_t v[4]) const {
    const int16x8_t a = vqaddq_s16(vqmovn_high_s32(vqmovn_s32(v[0]), v[1]), zero_point);
    const int16x8_t b = vqaddq_s16(vqmovn_high_s32(vqmovn_s32(v[2]), v[3]), zero_point);
    return vminq_s8(vmaxq_s8(vqmovn_high_s16(vqmovn_s16(a), b), lo), hi);
  }
};

// out[i] = output(values(x[i..], y[i..])) over [0, n) in steps of 16; the tail by `one`.
// values(int8x16_t x, int8x16_t y, int32x4_t v[4]) computes the 16 results before the
// zero point.
template <class Values, class One>
void binary16(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const Output& output, Values values, One one) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    int32x4_t v[4];
    values(vld1q_s8(a + i), vld1q_s8(b + i), v);
    vst1q_s8(out + i, output(v));
  }
  for (; i < n; ++i) out[i] = one(a[i], b[i]);
}

// The four int32 lanes of (x + offset) << shift for 16 values, shift in [16, 20]: the
// int16 lanes (x + offset) << (shift - 16), then a widening shift by 16.
template <int kShift>
inline void shifted(int8x16_t x, int16x8_t scaled_offset, int32x4_t v[4]) {
  static_assert(kShift >= 16 && kShift <= 20, "int16 lanes hold (x + offset) << (kShift - 16)");
  const int16x8_t lo = vaddq_s16(vshll_n_s8(vget_low_s8(x), kShift - 16), scaled_offset);
  const int16x8_t hi = vaddq_s16(vshll_high_n_s8(x, kShift - 16), scaled_offset);
  v[0] = vshll_n_s16(vget_low_s16(lo), 16);
  v[1] = vshll_high_n_s16(lo, 16);
  v[2] = vshll_n_s16(vget_low_s16(hi), 16);
  v[3] = vshll_high_n_s16(hi, 16);
}

// One input of the short form: the scaled value, (x + offset) << 20 times the input's
// multiplier; for the input of factor 1/2 that is (x + offset) << 19.
template <bool kHalf>
struct InputScale {
  int16x8_t scaled_offset;
  Scale<true> scale;
  InputScale(int32_t offset, int32_t m, int32_t shift)
      : scaled_offset(vdupq_n_s16(static_cast<int16_t>(offset * (kHalf ? 8 : 16)))), scale(m, shift) {}
  void apply(int8x16_t x, int32x4_t v[4]) const {
    shifted<kHalf ? 19 : 20>(x, scaled_offset, v);
    if (!kHalf) {
      for (int j = 0; j < 4; ++j) v[j] = scale.apply(v[j]);
    }
  }
};

bool is_half(int32_t m, int32_t shift) { return m == kHalfMultiplier && shift == 0; }

// The short form applies: int8's left shift, each input at 1/2 or shifted right, the output
// shifted right (every sum then stays below 2^29 in magnitude).
bool short_form(const AddParams& p) {
  const bool in1 = is_half(p.input1_multiplier, p.input1_shift) || p.input1_shift < 0;
  const bool in2 = is_half(p.input2_multiplier, p.input2_shift) || p.input2_shift < 0;
  return p.left_shift == 20 && in1 && in2 && p.output_shift < 0 && p.input1_offset >= -128 && p.input1_offset <= 128 &&
         p.input2_offset >= -128 && p.input2_offset <= 128;
}

template <bool kHalf1, bool kHalf2>
void add_short(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p, const Output& output) {
  const InputScale<kHalf1> in1(p.input1_offset, p.input1_multiplier, p.input1_shift);
  const InputScale<kHalf2> in2(p.input2_offset, p.input2_multiplier, p.input2_shift);
  const Scale<true> so(p.output_multiplier, p.output_shift);
  auto values = [&](int8x16_t x, int8x16_t y, int32x4_t v[4]) {
    int32x4_t w[4];
    in1.apply(x, v);
    in2.apply(y, w);
    for (int j = 0; j < 4; ++j) v[j] = so.apply(vaddq_s32(v[j], w[j]));
  };
  binary16(a, b, out, n, output, values, [&p](int8_t x, int8_t y) { return add_one(x, y, p); });
}

// int32 lanes of x + offset for 16 values.
inline void offset32(int8x16_t x, int16x8_t offset, int32x4_t v[4]) {
  const int16x8_t lo = vaddw_s8(offset, vget_low_s8(x)), hi = vaddw_high_s8(offset, x);
  v[0] = vmovl_s16(vget_low_s16(lo));
  v[1] = vmovl_high_s16(lo);
  v[2] = vmovl_s16(vget_low_s16(hi));
  v[3] = vmovl_high_s16(hi);
}

}  // namespace

void qs8_add__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  const Output output(p.output_offset, p.act_min, p.act_max);
  if (short_form(p)) {
    const bool half1 = is_half(p.input1_multiplier, p.input1_shift);
    const bool half2 = is_half(p.input2_multiplier, p.input2_shift);
    if (half1 && half2) return add_short<true, true>(a, b, out, n, p, output);
    if (half1) return add_short<true, false>(a, b, out, n, p, output);
    if (half2) return add_short<false, true>(a, b, out, n, p, output);
    return add_short<false, false>(a, b, out, n, p, output);
  }
  const int16x8_t off1 = vdupq_n_s16(static_cast<int16_t>(p.input1_offset));
  const int16x8_t off2 = vdupq_n_s16(static_cast<int16_t>(p.input2_offset));
  const int32x4_t shift = vdupq_n_s32(p.left_shift);
  const Scale<false> s1(p.input1_multiplier, p.input1_shift), s2(p.input2_multiplier, p.input2_shift);
  const Scale<false> so(p.output_multiplier, p.output_shift);
  auto values = [&](int8x16_t x, int8x16_t y, int32x4_t v[4]) {
    int32x4_t w[4];
    offset32(x, off1, v);
    offset32(y, off2, w);
    for (int j = 0; j < 4; ++j) {
      v[j] = so.apply(vaddq_s32(s1.apply(vshlq_s32(v[j], shift)), s2.apply(vshlq_s32(w[j], shift))));
    }
  };
  binary16(a, b, out, n, output, values, [&p](int8_t x, int8_t y) { return add_one(x, y, p); });
}

namespace {

// out[i] = clamp(sixteen(a[i..], b[i..])) over [0, n) in steps of 16 (the clamp only where
// kClamp), the tail by the linear form on scalars.
template <bool kClamp, class Sixteen>
void linear_rows(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f, Sixteen sixteen) {
  const int8x16_t lo = vdupq_n_s8(static_cast<int8_t>(f.act_min)), hi = vdupq_n_s8(static_cast<int8_t>(f.act_max));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const int8x16_t v = sixteen(vld1q_s8(a + i), vld1q_s8(b + i));
    vst1q_s8(out + i, kClamp ? vminq_s8(vmaxq_s8(v, lo), hi) : v);
  }
  for (; i < n; ++i) {
    const int32_t v = (f.x_coefficient * a[i] + f.y_coefficient * b[i] + f.bias) >> f.shift;
    out[i] = static_cast<int8_t>(std::min(f.act_max, std::max(f.act_min, v)));
  }
}

// The linear form (binary.h's AddLinear), 16 values per step. Where the shift is 17 to 24,
// each coefficient is split at 2^16 (binary.h's SplitCoefficients), so that the products come
// from int16 lanes (22 NEON instructions per 16 values where int32 lanes take 28): the sum of the
// low products plus the bias, shifted right by 16 (SMULL, SMLAL, then ADDHN: its high
// half), plus the high products (MLA on int16 lanes), is (cx * a + cy * b + bias) >> 16
// modulo 2^16, which is the value itself as |cx * a + cy * b + bias| < 2^31; the rest of
// the shift is a saturating narrow to int8 by an immediate (SQSHRN, also a floor). Every
// step wraps the same way (ADDHN's sum too), so no intermediate needs to fit. Any other
// shift takes the int32 products (MUL, MLA), SSHL by the negated shift and saturating
// narrows. Narrowing with saturation changes nothing the clamp, on bytes, would not, and
// is the whole clamp when the range is int8's (kClamp false).
template <int kHighShift, bool kClamp>  // shift - 16, in [1, 8]; 0: any shift
void add_linear(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  const SplitCoefficients c(f);
  const int32x4_t cx = vdupq_n_s32(f.x_coefficient), cy = vdupq_n_s32(f.y_coefficient);
  const int32x4_t bias = vdupq_n_s32(f.bias), neg_shift = vdupq_n_s32(-f.shift);
  auto sum = [&](int16x4_t x, int16x4_t y) { return vmlaq_s32(vmulq_s32(vmovl_s16(x), cx), vmovl_s16(y), cy); };
  // 8 results from int16 lanes of x and y, before the clamp
  auto eight = [&](int16x8_t x, int16x8_t y) -> int8x8_t {
    if constexpr (kHighShift > 0) {
      const int32x4_t l = vmlal_n_s16(vmull_n_s16(vget_low_s16(x), c.x_low), vget_low_s16(y), c.y_low);
      const int32x4_t h = vmlal_high_n_s16(vmull_high_n_s16(x, c.x_low), y, c.y_low);
      const int16x8_t top =
          vmlaq_n_s16(vmlaq_n_s16(vaddhn_high_s32(vaddhn_s32(l, bias), h, bias), x, c.x_high), y, c.y_high);
      return vqshrn_n_s16(top, kHighShift);
    } else {
      const int32x4_t l = sum(vget_low_s16(x), vget_low_s16(y)), h = sum(vget_high_s16(x), vget_high_s16(y));
      const int32x4_t sl = vshlq_s32(vaddq_s32(l, bias), neg_shift), sh = vshlq_s32(vaddq_s32(h, bias), neg_shift);
      return vqmovn_s16(vqmovn_high_s32(vqmovn_s32(sl), sh));
    }
  };
  linear_rows<kClamp>(a, b, out, n, f, [&](int8x16_t x, int8x16_t y) {
    return vcombine_s8(eight(vmovl_s8(vget_low_s8(x)), vmovl_s8(vget_low_s8(y))),
                       eight(vmovl_high_s8(x), vmovl_high_s8(y)));
  });
}

template <bool kClamp>
void add_linear_any(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  switch (f.shift) {
    case 17:
      return add_linear<1, kClamp>(a, b, out, n, f);
    case 18:
      return add_linear<2, kClamp>(a, b, out, n, f);
    case 19:
      return add_linear<3, kClamp>(a, b, out, n, f);
    case 20:
      return add_linear<4, kClamp>(a, b, out, n, f);
    case 21:
      return add_linear<5, kClamp>(a, b, out, n, f);
    case 22:
      return add_linear<6, kClamp>(a, b, out, n, f);
    case 23:
      return add_linear<7, kClamp>(a, b, out, n, f);
    case 24:
      return add_linear<8, kClamp>(a, b, out, n, f);
    default:
      return add_linear<0, kClamp>(a, b, out, n, f);
  }
}

// The int16 form (binary.h): the inputs widened to int16 lanes shifted left by the step
// (|a| * 2^8 <= 2^15), their products with the int16 coefficients summed by SMULL and SMLAL
// (cx * a + cy * b, modulo 2^32), then ADDHN with the bias and a shift by the rest of the
// shift on int16 lanes (SSHL by its negation, a floor), both exact modulo 2^16 as above.
template <int kStep, bool kClamp>
void add_linear16(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  const int16_t cx = f.x_int16(), cy = f.y_int16();
  const int32x4_t bias = vdupq_n_s32(f.bias);
  const int16x8_t neg_rest = vdupq_n_s16(static_cast<int16_t>(16 - f.shift));
  auto eight = [&](int16x8_t x, int16x8_t y) -> int8x8_t {
    const int32x4_t l = vmlal_n_s16(vmull_n_s16(vget_low_s16(x), cx), vget_low_s16(y), cy);
    const int32x4_t h = vmlal_high_n_s16(vmull_high_n_s16(x, cx), y, cy);
    return vqmovn_s16(vshlq_s16(vaddhn_high_s32(vaddhn_s32(l, bias), h, bias), neg_rest));
  };
  linear_rows<kClamp>(a, b, out, n, f, [&](int8x16_t x, int8x16_t y) {
    return vcombine_s8(eight(vshll_n_s8(vget_low_s8(x), kStep), vshll_n_s8(vget_low_s8(y), kStep)),
                       eight(vshll_high_n_s8(x, kStep), vshll_high_n_s8(y, kStep)));
  });
}

template <bool kClamp>
void add_linear16_any(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  static_assert(kInt16MaxStep == 8, "one case per step");
  switch (f.int16_step) {
    case 0:
      return add_linear16<0, kClamp>(a, b, out, n, f);
    case 1:
      return add_linear16<1, kClamp>(a, b, out, n, f);
    case 2:
      return add_linear16<2, kClamp>(a, b, out, n, f);
    case 3:
      return add_linear16<3, kClamp>(a, b, out, n, f);
    case 4:
      return add_linear16<4, kClamp>(a, b, out, n, f);
    case 5:
      return add_linear16<5, kClamp>(a, b, out, n, f);
    case 6:
      return add_linear16<6, kClamp>(a, b, out, n, f);
    case 7:
      return add_linear16<7, kClamp>(a, b, out, n, f);
    default:
      return add_linear16<8, kClamp>(a, b, out, n, f);
  }
}

}  // namespace

void qs8_add_linear__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddLinear& f) {
  const bool clamp = f.act_min > -128 || f.act_max < 127;
  if (f.is_int16()) return clamp ? add_linear16_any<true>(a, b, out, n, f) : add_linear16_any<false>(a, b, out, n, f);
  clamp ? add_linear_any<true>(a, b, out, n, f) : add_linear_any<false>(a, b, out, n, f);
}

void qs8_mul__neon(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  const Output output(p.output_offset, p.act_min, p.act_max);
  const int16x8_t off1 = vdupq_n_s16(static_cast<int16_t>(p.input1_offset));
  const int16x8_t off2 = vdupq_n_s16(static_cast<int16_t>(p.input2_offset));
  const Scale<false> so(p.output_multiplier, p.output_shift);
  auto values = [&](int8x16_t x, int8x16_t y, int32x4_t v[4]) {
    // (x + offset) fits int16 (|.| <= 256), the product int32
    const int16x8_t xl = vaddw_s8(off1, vget_low_s8(x)), xh = vaddw_high_s8(off1, x);
    const int16x8_t yl = vaddw_s8(off2, vget_low_s8(y)), yh = vaddw_high_s8(off2, y);
    v[0] = so.apply(vmull_s16(vget_low_s16(xl), vget_low_s16(yl)));
    v[1] = so.apply(vmull_high_s16(xl, yl));
    v[2] = so.apply(vmull_s16(vget_low_s16(xh), vget_low_s16(yh)));
    v[3] = so.apply(vmull_high_s16(xh, yh));
  };
  binary16(a, b, out, n, output, values, [&p](int8_t x, int8_t y) { return mul_one(x, y, p); });
}

}  // namespace edgeinf::qs8
