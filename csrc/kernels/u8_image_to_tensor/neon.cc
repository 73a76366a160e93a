// NEON image-to-tensor row primitives (aarch64); bit-exact with scalar.cc. Built only
// for aarch64, where NEON is baseline. No fused multiply-add: the float stage must round
// like the scalar reference (vmulq + vaddq, and -ffp-contract=off).
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "image_to_tensor.h"

namespace edgeinf::preprocess {
namespace {

// Tap pairs: UMULL/UMLAL of u8 pixels by u8 weights (w0 + w1 = 128): exact in u16,
// at most 255 * 128 = 32640, so the same bits read as int16.
inline int16x8_t taps(uint8x8_t p0, uint8x8_t p1, uint8x8_t w0, uint8x8_t w1) {
  return vreinterpretq_s16_u16(vmlal_u8(vmull_u8(p0, w0), p1, w1));
}

// h0 + ((h1 - h0) * b1 + 2^14) >> 15: SQRDMULH is (2*d*b + 2^15) >> 16, the same value
// (no saturation: b1 < 2^15 and |d| <= 32640).
inline int16x8_t blend(int16x8_t h0, int16x8_t h1, int16x8_t b) {
  return vaddq_s16(h0, vqrdmulhq_s16(vsubq_s16(h1, h0), b));
}

inline uint8x16_t load4x4(const uint8_t* row, const int32_t* o) {
  uint32_t v[4];
  for (int k = 0; k < 4; ++k) std::memcpy(&v[k], row + o[k], 4);
  return vreinterpretq_u8_u32(vld1q_u32(v));
}

// The bytes of 8 pixels' windows as one TBL table, a window of 4 bytes (two registers)
// or of 8 (four).
struct Window4 {
  static constexpr int kBytes = 4;
  using Table = uint8x16x2_t;
  static Table load(const uint8_t* row, const int32_t* o) { return {{load4x4(row, o), load4x4(row, o + 4)}}; }
  static uint8x8_t lookup(const Table& t, uint8x8_t idx) { return vqtbl2_u8(t, idx); }
};

struct Window8 {
  static constexpr int kBytes = 8;
  using Table = uint8x16x4_t;
  static Table load(const uint8_t* row, const int32_t* o) {
    Table t;
    for (int k = 0; k < 4; ++k) t.val[k] = vcombine_u8(vld1_u8(row + o[2 * k]), vld1_u8(row + o[2 * k + 1]));
    return t;
  }
  static uint8x8_t lookup(const Table& t, uint8x8_t idx) { return vqtbl4_u8(t, idx); }
};

// One to three channels from a window of Window::kBytes per pixel, 8 pixels per step: each
// channel's two taps are looked up in the window table. Channels come out planar; ST2/ST3
// interleave them for an interleaved row (4-byte windows are planar or one channel).
template <class Window, bool kTwoRows>
int hresample_windows(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int end, int16_t* out,
                      int plane_stride) {
  const int nch = pass.nch;
  uint8x8_t idx0[3], idx1[3];
  for (int c = 0; c < nch; ++c) {
    uint8_t a[8], b[8];
    for (int p = 0; p < 8; ++p) {
      a[p] = static_cast<uint8_t>(Window::kBytes * p + pass.i0[c]);
      b[p] = static_cast<uint8_t>(Window::kBytes * p + pass.i1[c]);
    }
    idx0[c] = vld1_u8(a);
    idx1[c] = vld1_u8(b);
  }
  const int16x8_t bv = vdupq_n_s16(static_cast<int16_t>(b1));
  const int32_t* offsets = pass.offset.data();
  const uint16_t* wpairs = pass.wpair.data();
  int x = 0;
  for (; x + 8 <= end; x += 8) {
    const uint8x8x2_t w = vld2_u8(reinterpret_cast<const uint8_t*>(wpairs + x));  // w0 x8, w1 x8
    const typename Window::Table t0 = Window::load(row0, offsets + x);
    typename Window::Table t1 = t0;
    if (kTwoRows) t1 = Window::load(row1, offsets + x);
    auto channel = [&](int c) {
      const int16x8_t h = taps(Window::lookup(t0, idx0[c]), Window::lookup(t0, idx1[c]), w.val[0], w.val[1]);
      if (!kTwoRows) return h;
      return blend(h, taps(Window::lookup(t1, idx0[c]), Window::lookup(t1, idx1[c]), w.val[0], w.val[1]), bv);
    };
    if (pass.planar || nch == 1) {
      for (int c = 0; c < nch; ++c) vst1q_s16(out + c * plane_stride + x, channel(c));
    } else if (nch == 3) {
      vst3q_s16(out + 3 * x, (int16x8x3_t{{channel(0), channel(1), channel(2)}}));
    } else {
      vst2q_s16(out + 2 * x, (int16x8x2_t{{channel(0), channel(1)}}));
    }
  }
  return x;
}

template <bool kTwoRows>
int hresample_simd(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int n, int16_t* out,
                   int plane_stride, LinePrefetch&) {
  if (pass.window4())
    return hresample_windows<Window4, kTwoRows>(pass, row0, row1, b1, std::min(n, pass.simd_end4), out, plane_stride);
  return hresample_windows<Window8, kTwoRows>(pass, row0, row1, b1, std::min(n, pass.simd_end8), out, plane_stride);
}

constexpr auto hresample = hresample_then_scalar<hresample_simd<false>>;
constexpr auto hblend = hblend_then_scalar<hresample_simd<true>>;

void vblend(const int16_t* h0, const int16_t* h1, int32_t b1, int n, int16_t* out) {
  const int16x8_t b = vdupq_n_s16(static_cast<int16_t>(b1));
  int i = 0;
  for (; i + 8 <= n; i += 8) vst1q_s16(out + i, blend(vld1q_s16(h0 + i), vld1q_s16(h1 + i), b));
  s16_vblend__scalar(h0, h1, b1, i, n, out);
}

void accumulate(const uint8_t* row, int n, int32_t w, int32_t* acc, bool init) {
  const int32x4_t wv = vdupq_n_s32(w);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const int16x8_t p = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(row + i)));
    int32x4_t lo = vmulq_s32(vmovl_s16(vget_low_s16(p)), wv);
    int32x4_t hi = vmulq_s32(vmovl_s16(vget_high_s16(p)), wv);
    if (!init) {
      lo = vaddq_s32(lo, vld1q_s32(acc + i));
      hi = vaddq_s32(hi, vld1q_s32(acc + i + 4));
    }
    vst1q_s32(acc + i, lo);
    vst1q_s32(acc + i + 4, hi);
  }
  u8_accumulate__scalar(row, i, n, w, acc, init);
}

// 24-element blocks, as the stage's pattern rows: 6 vectors of 4 lanes.
struct Pattern {
  float32x4_t v[6];
};

inline Pattern pattern(const Stage& st, int row) {
  Pattern p;
  for (int k = 0; k < 6; ++k) p.v[k] = vld1q_f32(st.pattern[row] + 4 * k);
  return p;
}

inline void to_float8(int16x8_t v, float32x4_t* f) {
  f[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(v)));
  f[1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(v)));
}

// Writes 24 results: floats as they are; integers clamped (FMAX/FMIN, as the scalar
// ternaries), rounded half to even (FCVTNS, as nearbyint) and narrowed.
inline void store24(const float32x4_t* x, const Stage& st, void* out, int i) {
  if (st.type == OutType::kFloat32) {
    float* o = static_cast<float*>(out) + i;
    for (int k = 0; k < 6; ++k) vst1q_f32(o + 4 * k, x[k]);
    return;
  }
  const float32x4_t lo = vdupq_n_f32(st.qmin), hi = vdupq_n_f32(st.qmax);
  int16x8_t q16[3];
  for (int k = 0; k < 3; ++k) {
    const int32x4_t a = vcvtnq_s32_f32(vminq_f32(vmaxq_f32(x[2 * k], lo), hi));
    const int32x4_t b = vcvtnq_s32_f32(vminq_f32(vmaxq_f32(x[2 * k + 1], lo), hi));
    q16[k] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
  }
  if (st.type == OutType::kInt8) {
    int8_t* o = static_cast<int8_t*>(out) + i;
    vst1q_s8(o, vcombine_s8(vqmovn_s16(q16[0]), vqmovn_s16(q16[1])));
    vst1_s8(o + 16, vqmovn_s16(q16[2]));
  } else {
    uint8_t* o = static_cast<uint8_t*>(out) + i;
    vst1q_u8(o, vcombine_u8(vqmovun_s16(q16[0]), vqmovun_s16(q16[1])));
    vst1_u8(o + 16, vqmovun_s16(q16[2]));
  }
}

// Integer outputs by the stage's proven int16 map (Stage::int_map): 24 elements per step,
// no float conversion; (v * mul) >> 16 by UMULL and SHRN. Values are clamped to
// [lo, hi] inside the type, so the saturating narrows are exact; when [lo, hi] is the
// type's whole range (Stage::saturating) the narrows are the clamp (the values are int16).
void affine_int(const int16_t* v, int n, const Stage& st, void* out) {
  uint16x8_t mul[3];
  int16x8_t whole[3], add[3];
  for (int k = 0; k < 3; ++k) {
    whole[k] = vld1q_s16(st.iwhole + 8 * k);
    mul[k] = vld1q_u16(st.imul + 8 * k);
    add[k] = vld1q_s16(st.iadd + 8 * k);
  }
  const int16x8_t shift = vdupq_n_s16(static_cast<int16_t>(-st.shift));
  const int16x8_t lo = vdupq_n_s16(st.lo), hi = vdupq_n_s16(st.hi);
  const bool s8 = st.type == OutType::kInt8;
  uint8_t* o = static_cast<uint8_t*>(out);
  int i = 0;
  for (; i + 24 <= n; i += 24) {
    for (int k = 0; k < 3; ++k) {
      const uint16x8_t x = vreinterpretq_u16_s16(vld1q_s16(v + i + 8 * k));
      const uint32x4_t pl = vmull_u16(vget_low_u16(x), vget_low_u16(mul[k]));
      const uint32x4_t ph = vmull_high_u16(x, mul[k]);
      const int16x8_t h = vreinterpretq_s16_u16(vcombine_u16(vshrn_n_u32(pl, 16), vshrn_n_u32(ph, 16)));
      // v * whole wraps mod 2^16 like the sums: the true total is in int16
      const int16x8_t t = vaddq_s16(vmlaq_s16(h, vreinterpretq_s16_u16(x), whole[k]), add[k]);
      int16x8_t y = vshlq_s16(t, shift);
      if (!st.saturating) y = vminq_s16(vmaxq_s16(y, lo), hi);
      if (s8)
        vst1_s8(reinterpret_cast<int8_t*>(o + i + 8 * k), vqmovn_s16(y));
      else
        vst1_u8(o + i + 8 * k, vqmovun_s16(y));
    }
  }
  s16_affine__scalar(v, i, n, st, out);
}

void affine(const int16_t* v, int n, const Stage& st, void* out) {
  if (st.int_map) return affine_int(v, n, st, out);
  const Pattern s = pattern(st, 4), b = pattern(st, 5);
  int i = 0;
  for (; i + 24 <= n; i += 24) {
    float32x4_t x[6];
    for (int k = 0; k < 3; ++k) to_float8(vld1q_s16(v + i + 8 * k), x + 2 * k);
    for (int k = 0; k < 6; ++k) x[k] = vaddq_f32(vmulq_f32(x[k], s.v[k]), b.v[k]);
    store24(x, st, out, i);
  }
  s16_affine__scalar(v, i, n, st, out);
}

// 24 interleaved elements from 8 pixels' values: each value repeated x3.
inline void expand3(const int16_t* v, float32x4_t* f) {
  static const uint8_t kCtl[3][16] = {{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 4, 5, 4, 5},
                                      {4, 5, 6, 7, 6, 7, 6, 7, 8, 9, 8, 9, 8, 9, 10, 11},
                                      {10, 11, 10, 11, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15}};
  const uint8x16_t x = vreinterpretq_u8_s16(vld1q_s16(v));
  for (int k = 0; k < 3; ++k) to_float8(vreinterpretq_s16_u8(vqtbl1q_u8(x, vld1q_u8(kCtl[k]))), f + 2 * k);
}

void matrix(const int16_t* a0, const int16_t* a1, const int16_t* a2, int n, const Stage& st, void* out) {
  const Pattern k0 = pattern(st, 0), k1 = pattern(st, 1), k2 = pattern(st, 2), k3 = pattern(st, 3);
  const Pattern s = pattern(st, 4), b = pattern(st, 5);
  const float32x4_t zero = vdupq_n_f32(0.0f), top = vdupq_n_f32(255.0f);
  int i = 0;
  for (; i + 24 <= n; i += 24) {
    float32x4_t f0[6], f1[6], f2[6];
    if (st.expand) {
      expand3(a0 + i / 3, f0);
      expand3(a1 + i / 3, f1);
      expand3(a2 + i / 3, f2);
    } else {
      for (int k = 0; k < 3; ++k) {
        to_float8(vld1q_s16(a0 + i + 8 * k), f0 + 2 * k);
        to_float8(vld1q_s16(a1 + i + 8 * k), f1 + 2 * k);
        to_float8(vld1q_s16(a2 + i + 8 * k), f2 + 2 * k);
      }
    }
    float32x4_t x[6];
    for (int k = 0; k < 6; ++k) {
      float32x4_t t = vaddq_f32(k0.v[k], vmulq_f32(k1.v[k], f0[k]));
      t = vaddq_f32(t, vmulq_f32(k2.v[k], f1[k]));
      t = vaddq_f32(t, vmulq_f32(k3.v[k], f2[k]));
      t = vminq_f32(vmaxq_f32(t, zero), top);
      x[k] = vaddq_f32(vmulq_f32(t, s.v[k]), b.v[k]);
    }
    store24(x, st, out, i);
  }
  s16_matrix__scalar(a0, a1, a2, i, n, st, out);
}

// Fixed-point YUV -> RGB of 8 pixels (see Yuv and s16_yuv_rgb__scalar): T is SQRDMULH (no
// saturation: no coefficient is -2^15).
struct YuvConvert {
  explicit YuvConvert(const Yuv& k)
      : k(k),
        sy(vdupq_n_s16(static_cast<int16_t>(k.sy))),
        su(vdupq_n_s16(static_cast<int16_t>(k.su))),
        sv(vdupq_n_s16(static_cast<int16_t>(k.sv))),
        yoff(vdupq_n_s16(k.y_off)) {}

  void operator()(const int16_t* y, const int16_t* u, const int16_t* v, int16x8_t ch[3]) const {
    const int16x8_t coff = vdupq_n_s16(4096), top = vdupq_n_s16(255 * 32), zero = vdupq_n_s16(0);
    const int16x8_t ys = load(y, yoff, sy), us = load(u, coff, su), vs = load(v, coff, sv);
    const int16x8_t luma = vqrdmulhq_n_s16(ys, k.ky);
    for (int c = 0; c < k.nch; ++c) {
      const int16x8_t x = vaddq_s16(luma, vaddq_s16(vqrdmulhq_n_s16(us, k.ku[c]), vqrdmulhq_n_s16(vs, k.kv[c])));
      ch[c] = vshlq_n_s16(vminq_s16(vmaxq_s16(x, zero), top), 2);
    }
  }

  static int16x8_t load(const int16_t* p, int16x8_t off, int16x8_t shift) {
    return vshlq_s16(vsubq_s16(vshrq_n_s16(vaddq_s16(vld1q_s16(p), vdupq_n_s16(2)), 2), off), shift);
  }

  const Yuv& k;
  int16x8_t sy, su, sv, yoff;
};

// ST3 interleaves three channels.
void yuv_rgb(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, int16_t* out) {
  const YuvConvert convert(k);
  const int nch = k.nch;
  int i = 0;
  for (; i + 8 <= n && (nch == 1 || nch == 3); i += 8) {
    int16x8_t ch[3];
    convert(y + i, u + i, v + i, ch);
    if (nch == 1)
      vst1q_s16(out + i, ch[0]);
    else
      vst3q_s16(out + 3 * i, (int16x8x3_t{{ch[0], ch[1], ch[2]}}));
  }
  s16_yuv_rgb__scalar(y, u, v, i, n, k, out);
}

// yuv_rgb and affine_int fused, 8 pixels per step: each channel is mapped with its own
// constants (element i * nch + c has channel c, as nch is the stage's period), narrowed to
// bytes and interleaved by ST3.
void yuv_quantize(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, const Stage& st,
                  void* out) {
  const YuvConvert convert(k);
  const int nch = k.nch;
  const int16x8_t shift = vdupq_n_s16(static_cast<int16_t>(-st.shift));
  const int16x8_t lo = vdupq_n_s16(st.lo), hi = vdupq_n_s16(st.hi);
  const bool s8 = st.type == OutType::kInt8;
  uint8_t* o = static_cast<uint8_t*>(out);
  int i = 0;
  for (; i + 8 <= n && (nch == 1 || nch == 3); i += 8) {
    int16x8_t ch[3];
    convert(y + i, u + i, v + i, ch);
    uint8x8_t b[3];
    for (int c = 0; c < nch; ++c) {
      const uint16x8_t x = vreinterpretq_u16_s16(ch[c]);
      const uint32x4_t pl = vmull_n_u16(vget_low_u16(x), st.imul[c]);
      const uint32x4_t ph = vmull_high_n_u16(x, st.imul[c]);
      const int16x8_t h = vreinterpretq_s16_u16(vcombine_u16(vshrn_n_u32(pl, 16), vshrn_n_u32(ph, 16)));
      // v * whole wraps mod 2^16 like the sums: the true total is in int16 (see affine_int)
      const int16x8_t t = vaddq_s16(vmlaq_n_s16(h, ch[c], st.iwhole[c]), vdupq_n_s16(st.iadd[c]));
      int16x8_t q = vshlq_s16(t, shift);
      if (!st.saturating) q = vminq_s16(vmaxq_s16(q, lo), hi);
      b[c] = s8 ? vreinterpret_u8_s8(vqmovn_s16(q)) : vqmovun_s16(q);
    }
    if (nch == 1)
      vst1_u8(o + i, b[0]);
    else
      vst3_u8(o + 3 * i, (uint8x8x3_t{{b[0], b[1], b[2]}}));
  }
  s16_yuv_quantize__scalar(y, u, v, i, n, k, st, out);
}

}  // namespace

const Kernels& kernels__neon() {
  static const Kernels k{hresample, hblend, vblend,  accumulate,  s32_area_reduce__scalar,
                         affine,    matrix, yuv_rgb, yuv_quantize};
  return k;
}

}  // namespace edgeinf::preprocess
