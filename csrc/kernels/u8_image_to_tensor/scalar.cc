// Scalar reference of the image-to-tensor row primitives. The SIMD files must match it
// bit for bit; they call these functions for tails and for cases they do not vectorize.
#include <algorithm>
#include <cmath>

#include "image_to_tensor.h"

namespace edgeinf::preprocess {

// Tap pair with 7-bit weights: w0 * p0 + w1 * p1, w0 + w1 = 128, exact in [0, 32640].
// Tap 1 is read only when it weighs something: at the right edge of a one-pixel ROI
// there is no tap 1.
void u8_hresample__scalar(const HPass& pass, const uint8_t* row, int begin, int end, int16_t* out, int plane_stride) {
  const int nch = pass.nch;
  for (int x = begin; x < end; ++x) {
    const uint8_t* px = row + pass.offset[x];
    const int w0 = pass.wpair[x] & 0xff, w1 = pass.wpair[x] >> 8;
    for (int c = 0; c < nch; ++c) {
      int v = w0 * px[pass.i0[c]];
      if (w1) v += w1 * px[pass.i1[c]];
      if (pass.planar)
        out[c * plane_stride + x] = static_cast<int16_t>(v);
      else
        out[x * nch + c] = static_cast<int16_t>(v);
    }
  }
}

// hresample of row0 and of row1, then vblend, in one loop (same values, element by element).
void u8_hblend__scalar(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int begin, int end,
                       int16_t* out, int plane_stride) {
  const int nch = pass.nch;
  for (int x = begin; x < end; ++x) {
    const uint8_t* p0 = row0 + pass.offset[x];
    const uint8_t* p1 = row1 + pass.offset[x];
    const int w0 = pass.wpair[x] & 0xff, w1 = pass.wpair[x] >> 8;
    for (int c = 0; c < nch; ++c) {
      int h0 = w0 * p0[pass.i0[c]], h1 = w0 * p1[pass.i0[c]];
      if (w1) {
        h0 += w1 * p0[pass.i1[c]];
        h1 += w1 * p1[pass.i1[c]];
      }
      const int16_t v = static_cast<int16_t>(h0 + (((h1 - h0) * b1 + (1 << 14)) >> 15));
      if (pass.planar)
        out[c * plane_stride + x] = v;
      else
        out[x * nch + c] = v;
    }
  }
}

// Vertical blend with a 15-bit weight and round-half-up: h0 + floor(((h1-h0)*b1 + 2^14) / 2^15).
// (h1-h0)*b1 fits int32 (|h1-h0| <= 32640, b1 < 2^15), and >> on a negative int is floor
// (arithmetic shift) with GCC and Clang. The same value as x86 PMULHRSW and Arm SQRDMULH.
void s16_vblend__scalar(const int16_t* h0, const int16_t* h1, int32_t b1, int begin, int end, int16_t* out) {
  for (int i = begin; i < end; ++i) {
    const int32_t d = h1[i] - h0[i];
    out[i] = static_cast<int16_t>(h0[i] + ((d * b1 + (1 << 14)) >> 15));
  }
}

void u8_accumulate__scalar(const uint8_t* row, int begin, int end, int32_t w, int32_t* acc, bool init) {
  if (init) {
    for (int i = begin; i < end; ++i) acc[i] = w * row[i];
  } else {
    for (int i = begin; i < end; ++i) acc[i] += w * row[i];
  }
}

// Area reduction: sum of (row sums weighted by 2^11-scaled box weights) * (column
// weights, 2^11 scaled), at most 255 * 2^22 < 2^31; rounded to 1/128 levels.
void s32_area_reduce__scalar(const HPass& pass, const int32_t* acc, int n, int16_t* out, int plane_stride) {
  const int nch = pass.nch;
  for (int x = 0; x < n; ++x) {
    const int32_t k0 = pass.tap_start[x], k1 = pass.tap_start[x + 1];
    for (int c = 0; c < nch; ++c) {
      int32_t sum = 0;
      for (int32_t k = k0; k < k1; ++k) sum += pass.tap_weight[k] * acc[pass.tap_offset[k] + pass.i0[c]];
      const int16_t v = static_cast<int16_t>((sum + (1 << (kAreaShift - 1))) >> kAreaShift);
      if (pass.planar)
        out[c * plane_stride + x] = v;
      else
        out[x * nch + c] = v;
    }
  }
}

namespace {

// The one rounding rule of integer outputs: clamp, then round half to even (the default
// FP environment; what CVTPS2DQ and FCVTNS do).
inline float quantize(float v, float qmin, float qmax) {
  v = v > qmin ? v : qmin;
  v = v < qmax ? v : qmax;
  return std::nearbyint(v);
}

template <class T>
void store(void* out, int i, float v, float qmin, float qmax) {
  static_cast<T*>(out)[i] = static_cast<T>(quantize(v, qmin, qmax));
}

inline void emit(OutType type, void* out, int i, float v, float qmin, float qmax) {
  switch (type) {
    case OutType::kFloat32:
      static_cast<float*>(out)[i] = v;
      break;
    case OutType::kInt8:
      store<int8_t>(out, i, v, qmin, qmax);
      break;
    case OutType::kUInt8:
      store<uint8_t>(out, i, v, qmin, qmax);
      break;
  }
}

}  // namespace

void s16_affine__scalar(const int16_t* v, int begin, int end, const Stage& st, void* out) {
  for (int i = begin; i < end; ++i) {
    const Channel& c = st.ch[i % st.period];
    const float x = static_cast<float>(v[i]) * c.scale + c.bias;
    emit(st.type, out, i, x, st.qmin, st.qmax);
  }
}

// Colour matrix, always evaluated as ((k0 + k1*a0) + k2*a1) + k3*a2 so every ISA rounds
// the same way; the colour is clamped to [0, 255] levels like an 8-bit conversion would.
void s16_matrix__scalar(const int16_t* a0, const int16_t* a1, const int16_t* a2, int begin, int end, const Stage& st,
                        void* out) {
  for (int i = begin; i < end; ++i) {
    const Channel& c = st.ch[i % st.period];
    const int j = st.expand ? i / 3 : i;
    float x = c.k0 + c.k1 * static_cast<float>(a0[j]);
    x = x + c.k2 * static_cast<float>(a1[j]);
    x = x + c.k3 * static_cast<float>(a2[j]);
    // written as the SIMD max/min are defined (a > b ? a : b), so a -0 clamps to +0 everywhere
    x = x > 0.0f ? x : 0.0f;
    x = x < 255.0f ? x : 255.0f;
    x = x * c.scale + c.bias;
    emit(st.type, out, i, x, st.qmin, st.qmax);
  }
}

namespace {

// Fixed-point YUV -> RGB of pixel i (see Yuv in image_to_tensor.h) into k.nch values in
// 1/128 levels: int32 arithmetic here; every value fits int16, and T is exactly PMULHRSW /
// SQRDMULH (>> of a negative int is floor).
inline void yuv_pixel(const int16_t* y, const int16_t* u, const int16_t* v, int i, const Yuv& k, int16_t* rgb) {
  auto term = [](int32_t x, int32_t coef) { return (x * coef + (1 << 14)) >> 15; };
  // 1/32 levels, shifted: a multiply, since the offset values may be negative (a left shift
  // of a negative int is undefined in C++17; SIMD shifts lanes, the same bits)
  const int32_t ys = (((y[i] + 2) >> 2) - k.y_off) * (1 << k.sy);
  const int32_t us = (((u[i] + 2) >> 2) - 4096) * (1 << k.su);
  const int32_t vs = (((v[i] + 2) >> 2) - 4096) * (1 << k.sv);
  const int32_t luma = term(ys, k.ky);
  for (int c = 0; c < k.nch; ++c) {
    int32_t x = luma + term(us, k.ku[c]) + term(vs, k.kv[c]);
    x = std::min(std::max(x, 0), 255 * 32);
    rgb[c] = static_cast<int16_t>(x * 4);
  }
}

}  // namespace

void s16_yuv_rgb__scalar(const int16_t* y, const int16_t* u, const int16_t* v, int begin, int end, const Yuv& k,
                         int16_t* out) {
  for (int i = begin; i < end; ++i) yuv_pixel(y, u, v, i, k, out + i * k.nch);
}

// The affine stage applied to each converted pixel as it comes (element i * nch + c).
void s16_yuv_quantize__scalar(const int16_t* y, const int16_t* u, const int16_t* v, int begin, int end, const Yuv& k,
                              const Stage& st, void* out) {
  for (int i = begin; i < end; ++i) {
    int16_t rgb[3];
    yuv_pixel(y, u, v, i, k, rgb);
    for (int c = 0; c < k.nch; ++c) {
      const int e = i * k.nch + c;
      const Channel& ch = st.ch[e % st.period];
      emit(st.type, out, e, static_cast<float>(rgb[c]) * ch.scale + ch.bias, st.qmin, st.qmax);
    }
  }
}

namespace {

// The reference vectorizes no columns: hresample and hblend are the scalar passes whole.
int no_columns(const HPass&, const uint8_t*, const uint8_t*, int32_t, int, int16_t*, int, LinePrefetch&) { return 0; }
constexpr auto hresample = hresample_then_scalar<no_columns>;
constexpr auto hblend = hblend_then_scalar<no_columns>;
void vblend(const int16_t* h0, const int16_t* h1, int32_t b1, int n, int16_t* out) {
  s16_vblend__scalar(h0, h1, b1, 0, n, out);
}
void accumulate(const uint8_t* row, int n, int32_t w, int32_t* acc, bool init) {
  u8_accumulate__scalar(row, 0, n, w, acc, init);
}
void accumulate_rows(const uint8_t* const* rows, const int32_t* w, int count, int n, int32_t* acc, bool init) {
  u8_accumulate_rows__scalar(rows, w, count, 0, n, acc, init);
}
void affine(const int16_t* v, int n, const Stage& st, void* out) { s16_affine__scalar(v, 0, n, st, out); }
void matrix(const int16_t* a0, const int16_t* a1, const int16_t* a2, int n, const Stage& st, void* out) {
  s16_matrix__scalar(a0, a1, a2, 0, n, st, out);
}
void yuv_rgb(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, int16_t* out) {
  s16_yuv_rgb__scalar(y, u, v, 0, n, k, out);
}
void yuv_quantize(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, const Stage& st,
                  void* out) {
  s16_yuv_quantize__scalar(y, u, v, 0, n, k, st, out);
}

}  // namespace

const Kernels& kernels__scalar() {
  static const Kernels k{hresample, hblend, vblend,  accumulate,   s32_area_reduce__scalar,
                         affine,    matrix, yuv_rgb, yuv_quantize, accumulate_rows};
  return k;
}

}  // namespace edgeinf::preprocess
