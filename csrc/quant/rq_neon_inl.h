// NEON requantization of 8 accumulators in channel order (int32x4 x 2) with the
// per-channel parameters of a Requantization (padded to whole blocks), bit-exact with
// requantize.h, by the fixed-point steps or, where it was fitted, the float form
// (rq_params.h's FloatRequantization). Include only from files compiled for aarch64.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <vector>

#include "neon_inl.h"
#include "requantization.h"
#include "rq_params.h"

namespace edgeinf::qs8::neon_rq {

// The float form needs FPCR's default: round to nearest (RMode 0), which SCVTF and FMLA
// follow, and no flushing of denormals (FZ). FCVTNS rounds to nearest even by itself.
static inline bool rounds_to_nearest() {
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  return (fpcr & (uint64_t{7} << 22)) == 0;  // RMode (bits 22-23) and FZ (bit 24)
}

// The float form with a given offset: FCVTNS(FMLA(offset, SCVTF(acc), scale)), the same
// operations, one rounding each, as AVX2's VCVTPS2DQ(VFMADD(VCVTDQ2PS(acc))).
static inline int32x4_t float_form(int32x4_t acc, float32x4_t scale, float32x4_t offset) {
  return vcvtnq_s32_f32(vfmaq_f32(offset, vcvtq_f32_s32(acc), scale));
}

// ... with the offset chosen by the sign of acc (FloatRequantization::split).
static inline int32x4_t float_form_split(int32x4_t acc, float32x4_t scale, float32x4_t offset, float32x4_t offset_neg) {
  return float_form(acc, scale, vbslq_f32(vcltzq_s32(acc), offset_neg, offset));
}

// The float form of a call, or null: the fitted one while FPCR rounds to nearest.
static inline const FloatRequantization* usable(const FloatRequantization* fl) {
  return fl && rounds_to_nearest() ? fl : nullptr;
}

struct Output {
  const Requantization& rq;
  // the float form's parameters (FloatRequantization's), or scale null: the fixed-point steps
  const float *scale = nullptr, *offset = nullptr, *offset_neg = nullptr;
  bool split = false;
  int32x4_t zero_point, lo, hi;
  int8x16_t lo8, hi8;  // the activation range as int8 (it lies within int8)
  bool clamps;         // ... narrower than int8: a value narrowed with saturation needs clamping
  // -right_shift per channel, for kernels that load kFixedRight's parameters at each use
  // (negated_right_shifts; set by the kernel that made it)
  const int32_t* neg_right_shift = nullptr;
  explicit Output(const Requantization& r, const FloatRequantization* f = nullptr)
      : rq(r),
        zero_point(vdupq_n_s32(r.output_zero_point)),
        lo(vdupq_n_s32(r.act_min)),
        hi(vdupq_n_s32(r.act_max)),
        lo8(vdupq_n_s8(static_cast<int8_t>(r.act_min))),
        hi8(vdupq_n_s8(static_cast<int8_t>(r.act_max))),
        clamps(r.act_min > -128 || r.act_max < 127) {
    if (const FloatRequantization* fl = usable(f)) {
      scale = fl->scale.data(), offset = fl->offset.data(), offset_neg = fl->offset_neg.data();
      split = fl->split;
    }
  }
};

// Channels c .. c + 3 of the float form (zero point in the offsets), clamped.
static inline int32x4_t float_form4(int32x4_t acc, const Output& q, size_t c) {
  const float32x4_t s = vld1q_f32(q.scale + c), o = vld1q_f32(q.offset + c);
  const int32x4_t v = q.split ? float_form_split(acc, s, o, vld1q_f32(q.offset_neg + c)) : float_form(acc, s, o);
  return vminq_s32(vmaxq_s32(v, q.lo), q.hi);
}

// Channels c .. c + 7 from accumulators a0 (c .. c + 3) and a1 (c + 4 .. c + 7).
static inline int8x8_t requantize8(int32x4_t a0, int32x4_t a1, const Output& q, size_t c) {
  if (q.scale) return neon::pack8(float_form4(a0, q, c), float_form4(a1, q, c + 4));
  const Requantization& rq = q.rq;
  const int32x4_t v0 = neon::requantize(a0, vld1q_s32(rq.multiplier.data() + c), vld1q_s32(rq.left_shift.data() + c),
                                        vnegq_s32(vld1q_s32(rq.right_shift.data() + c)), q.zero_point, q.lo, q.hi);
  const int32x4_t v1 =
      neon::requantize(a1, vld1q_s32(rq.multiplier.data() + c + 4), vld1q_s32(rq.left_shift.data() + c + 4),
                       vnegq_s32(vld1q_s32(rq.right_shift.data() + c + 4)), q.zero_point, q.lo, q.hi);
  return neon::pack8(v0, v1);
}

// Which requantization an Output holds, where a kernel fixes it at compile time (kAny: read
// at each call). A fixed form leaves the float form's branch and unused parameters out of a
// loop whose accumulators need the registers.
// kFixedRight: the fixed-point steps where every channel shifts right and none left
// (neon::mbqm_right), which take fewer operations than the split float form.
enum class Form { kAny, kFixedPoint, kFloat, kFloatSplit, kFixedRight };

static inline Form form_of(const Output& q) {
  return !q.scale ? Form::kFixedPoint : q.split ? Form::kFloatSplit : Form::kFloat;
}

// Every channel of [0, channels) shifts right by at least one bit and none left.
static inline bool shifts_right_only(const Requantization& rq, size_t channels) {
  for (size_t c = 0; c < channels; ++c) {
    if (rq.left_shift[c] != 0 || rq.right_shift[c] < 1) return false;
  }
  return true;
}

// -right_shift of channels [0, channels): kFixedRight's SRSHL operand, made once per call
// by kernels that would otherwise negate it at each use.
static inline std::vector<int32_t> negated_right_shifts(const Requantization& rq, size_t channels) {
  std::vector<int32_t> neg(channels);
  for (size_t c = 0; c < channels; ++c) neg[c] = -rq.right_shift[c];
  return neg;
}

// The form a kernel with Requantize16Of should compile for channels [0, channels): the
// unsplit float form where it was fitted, else kFixedRight where it applies (cheaper than
// the split float form), else form_of's.
static inline Form fastest_form(const Output& q, size_t channels) {
  const Form f = form_of(q);
  return f != Form::kFloat && shifts_right_only(q.rq, channels) ? Form::kFixedRight : f;
}

// offsets[4i .. 4i + 3] + x * scale: FMLA into the register the offsets are loaded into. One
// asm statement, as the compiler left to itself may load two offsets as a pair and copy one
// into FMLA's destination, a vector move on a NEON pipe; the offsets' address is one register
// for the four (an "m" operand each takes a register of its own).
template <int I>
static inline float32x4_t fma_loaded(const float* offsets, float32x4_t x, float32x4_t scale) {
  float32x4_t r;
  __asm__("ldr %q0, [%1, #%4]\n\tfmla %0.4s, %2.4s, %3.4s"
          : "=&w"(r)
          : "r"(offsets), "w"(x), "w"(scale), "n"(16 * I), "m"(*reinterpret_cast<const float(*)[16]>(offsets)));
  return r;
}

// The requantization of 16 channels c .. c + 15, its float form's parameters held in
// registers: built once before a loop over pixels, whose int8 stores would otherwise make
// the compiler reload them (an int8 store may alias anything). The float form is narrowed
// with saturation and clamped as int8, two operations for 16 lanes where the int32 clamp
// takes eight: saturation is monotonic and the activation range lies within int8, so the
// result equals requantize8's, and without an activation (the range all of int8) it
// needs no clamp. F: the Output's form (form_of), or kAny.
//
// kFixedRight: neon::mbqm_right8, the zero point added in int16 lanes.
//
// L: the unsplit float form's FMLA by fma_loaded, where a kernel's loop showed the copies.
template <Form F, bool L = false>
struct Requantize16Of {
  const Output& q;
  size_t c;
  float32x4_t scale[4], offset[4], offset_neg[4];  // offset, offset_neg: the split form's
  // The unsplit form's offsets, loaded at each use: FMLA overwrites its addend, so one held
  // in a register would cost a vector move per use, on a NEON pipe.
  const float* offsets = nullptr;
  int8x16_t lo, hi;
  bool clamps;
  bool floating() const { return F == Form::kAny ? q.scale != nullptr : F == Form::kFloat || F == Form::kFloatSplit; }
  bool split() const { return F == Form::kAny ? q.split : F == Form::kFloatSplit; }
  int32x4_t multiplier[4], neg_right_shift[4];  // kFixedRight's
  int16x8_t zero_point16;
  Requantize16Of(const Output& out, size_t channel) : q(out), c(channel), lo(out.lo8), hi(out.hi8), clamps(out.clamps) {
    if constexpr (F == Form::kFixedRight) {
      zero_point16 = vdupq_n_s16(static_cast<int16_t>(out.rq.output_zero_point));
      for (int i = 0; i < 4; ++i) {
        multiplier[i] = vld1q_s32(out.rq.multiplier.data() + c + 4 * i);
        neg_right_shift[i] = vnegq_s32(vld1q_s32(out.rq.right_shift.data() + c + 4 * i));
      }
    }
    if (!floating()) return;
    offsets = q.offset + c;
    for (int i = 0; i < 4; ++i) {
      scale[i] = vld1q_f32(q.scale + c + 4 * i);
      if (split()) offset[i] = vld1q_f32(q.offset + c + 4 * i), offset_neg[i] = vld1q_f32(q.offset_neg + c + 4 * i);
    }
  }
  // a[i]: channels c + 4i .. c + 4i + 3 (inlined into a kernel's loop, whose accumulators
  // would otherwise go through memory)
  __attribute__((always_inline)) int8x16_t operator()(const int32x4_t (&a)[4]) const {
    if constexpr (F == Form::kFixedRight) {
      int16x8_t h[2];
      for (int i = 0; i < 2; ++i) {
        h[i] = neon::mbqm_right8(a[2 * i], a[2 * i + 1], multiplier[2 * i], multiplier[2 * i + 1],
                                 neg_right_shift[2 * i], neg_right_shift[2 * i + 1], zero_point16);
      }
      const int8x16_t b = vqmovn_high_s16(vqmovn_s16(h[0]), h[1]);
      return clamps ? vminq_s8(vmaxq_s8(b, lo), hi) : b;
    }
    if (!floating()) return vcombine_s8(requantize8(a[0], a[1], q, c), requantize8(a[2], a[3], q, c + 8));
    int32x4_t v[4];
    if (split()) {
      for (int i = 0; i < 4; ++i) v[i] = float_form_split(a[i], scale[i], offset[i], offset_neg[i]);
    } else if constexpr (L) {
      v[0] = vcvtnq_s32_f32(fma_loaded<0>(offsets, vcvtq_f32_s32(a[0]), scale[0]));
      v[1] = vcvtnq_s32_f32(fma_loaded<1>(offsets, vcvtq_f32_s32(a[1]), scale[1]));
      v[2] = vcvtnq_s32_f32(fma_loaded<2>(offsets, vcvtq_f32_s32(a[2]), scale[2]));
      v[3] = vcvtnq_s32_f32(fma_loaded<3>(offsets, vcvtq_f32_s32(a[3]), scale[3]));
    } else {
      for (int i = 0; i < 4; ++i) v[i] = float_form(a[i], scale[i], vld1q_f32(offsets + 4 * i));
    }
    const int16x8_t h0 = vqmovn_high_s32(vqmovn_s32(v[0]), v[1]), h1 = vqmovn_high_s32(vqmovn_s32(v[2]), v[3]);
    const int8x16_t b = vqmovn_high_s16(vqmovn_s16(h0), h1);
    return clamps ? vminq_s8(vmaxq_s8(b, lo), hi) : b;
  }
};
using Requantize16 = Requantize16Of<Form::kAny>;

static inline int8x16_t requantize16(const int32x4_t (&a)[4], const Output& q, size_t c) {
  return Requantize16(q, c)(a);
}

}  // namespace edgeinf::qs8::neon_rq
