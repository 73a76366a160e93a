// Shared tail of the NEON GEMM tiles (requantize 8 columns of int32 and store them) and
// the state of the batch-1 GEMV.
// Include only from aarch64 files (neon.cc, neondot.cc).
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "../../quant/neon_inl.h"
#include "gemm.h"

namespace edgeinf::qs8::neon {

// requantize_double without its clamp: FCVTAS rounds to nearest with ties away from zero
// (std::round) and saturates to int64 as FRINTA + FCVTZS do, in one instruction.
inline int32x4_t scaled_double(int32x4_t acc, const double* scale, int32x4_t zero_point) {
  const int64x2_t a = vcvtaq_s64_f64(vmulq_f64(vcvtq_f64_s64(vmovl_s32(vget_low_s32(acc))), vld1q_f64(scale)));
  const int64x2_t b = vcvtaq_s64_f64(vmulq_f64(vcvtq_f64_s64(vmovl_high_s32(acc)), vld1q_f64(scale + 2)));
  return vaddq_s32(vcombine_s32(vqmovn_s64(a), vqmovn_s64(b)), zero_point);
}

// 8 requantized int32 lanes (zero point added, wrapping as the reference's int32 sum) to
// bytes: saturating to int8 first and clamping the 8 bytes after equals clamping in int32,
// the activation range lying within int8; two clamps of 8 lanes instead of four of 4.
inline int8x8_t narrow_clamp(int32x4_t a, int32x4_t b, int8x8_t lo, int8x8_t hi) {
  return vmin_s8(vmax_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))), lo), hi);
}

template <int R>
inline void store_tile(int32x4_t (&acc)[R][2], const GemmWeights& w, size_t col0, size_t ncols, int8_t* out,
                       size_t out_stride) {
  const Requantization& rq = w.requantization();
  int32x4_t m[2], l[2], nr[2];
  for (int h = 0; h < 2; ++h) {
    m[h] = vld1q_s32(rq.multiplier.data() + col0 + 4 * h);
    l[h] = vld1q_s32(rq.left_shift.data() + col0 + 4 * h);
    nr[h] = vnegq_s32(vld1q_s32(rq.right_shift.data() + col0 + 4 * h));
  }
  const int32x4_t zp = vdupq_n_s32(rq.output_zero_point);
  const int8x8_t lo = vdup_n_s8(static_cast<int8_t>(std::max<int32_t>(rq.act_min, -128)));
  const int8x8_t hi = vdup_n_s8(static_cast<int8_t>(std::min<int32_t>(rq.act_max, 127)));
  const bool in_double = w.requantizes_in_double();
  const double* ds = w.double_scale() + col0;
  for (int r = 0; r < R; ++r) {
    const int8x8_t bytes =
        in_double ? narrow_clamp(scaled_double(acc[r][0], ds, zp), scaled_double(acc[r][1], ds + 4, zp), lo, hi)
                  : narrow_clamp(vaddq_s32(mbqm(acc[r][0], m[0], l[0], nr[0]), zp),
                                 vaddq_s32(mbqm(acc[r][1], m[1], l[1], nr[1]), zp), lo, hi);
    int8_t* o = out + r * out_stride + col0;
    if (ncols == 8) {
      vst1_s8(o, bytes);
    } else {
      int8_t tmp[8];
      vst1_s8(tmp, bytes);
      std::memcpy(o, tmp, ncols);
    }
  }
}

// One row (batch-1 fully connected), four 8-column panels at a time, prefetching the next
// four: the weights are read once, usually from memory, and several streams in flight
// move more bytes per second than one (as on AVX2). The ISA files differ only in how they
// multiply; the accumulators start at the bias terms and end through store_tile.
constexpr size_t kGemvBlocks = 4;
constexpr size_t kGemvPanelColumns = 8;

struct GemvPanels {
  int32x4_t acc[kGemvBlocks][1][2];
  const int8_t* b[kGemvBlocks];

  GemvPanels(const GemmWeights& w, size_t col0, const int8_t* panel, size_t panel_bytes) {
    for (size_t q = 0; q < kGemvBlocks; ++q) {
      acc[q][0][0] = vld1q_s32(w.bias_minus_zero_point_terms() + col0 + q * kGemvPanelColumns);
      acc[q][0][1] = vld1q_s32(w.bias_minus_zero_point_terms() + col0 + q * kGemvPanelColumns + 4);
      b[q] = panel + q * panel_bytes;
    }
  }

  // store_tile adds the column offset to `out_row` itself.
  void store(const GemmWeights& w, size_t col0, int8_t* out_row) {
    for (size_t q = 0; q < kGemvBlocks; ++q) {
      store_tile<1>(acc[q], w, col0 + q * kGemvPanelColumns, kGemvPanelColumns, out_row, 0);
    }
  }
};

}  // namespace edgeinf::qs8::neon
