// NEON GEMM without the dot-product extension (Cortex-A53/A72): 6x8 tiles.
//
// Raw int8 activations times int8 weights: VMULL gives exact int16 products (at most
// 128 * 128), VPADAL adds the pair of K values of each column into int32. The zero
// point enters through the precomputed bias - zero_point * sum(w) start value, which
// is equal modulo 2^32 to the reference accumulator. With no weight of -128, a VMLAL adds
// a second K pair's products to the same int16 lanes first (see tile). The driver and the
// epilogue are neon_gemm_inl.h's.
#include <arm_neon.h>

#include <cstring>

#include "gemm.h"
#include "neon_gemm_inl.h"

namespace edgeinf::qs8 {
namespace {

using neon::kGemvBlocks;

// A K pair of a row (two int8 values) broadcast to every int16 lane.
inline int8x16_t pair_at(const int8_t* p) {
  int16_t pair;
  std::memcpy(&pair, p, sizeof(pair));
  return vreinterpretq_s8_s16(vdupq_n_s16(pair));
}

struct PairKernel {
  static constexpr PackLayout kLayout = kNeonLayout;

  template <int R>
  static void tile(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, bool negatable,
                   int32x4_t (&acc)[R][2]) {
    const size_t kpairs = kp / 2;
    size_t p = 0;
    if (negatable) {
      // Two K pairs per int16 lane (VMULL then VMLAL) before one VPADAL: |a * w| <= 128 * 127,
      // so two products fit int16 when no weight is -128. Half the VPADALs, which the A53's
      // 64-bit NEON datapath runs in two passes.
      for (; p + 2 <= kpairs; p += 2) {
        const int8x16_t b0 = vld1q_s8(b), b1 = vld1q_s8(b + 16);
        b += 32;
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int8x16_t a0 = pair_at(a + r * a_stride + 2 * p), a1 = pair_at(a + r * a_stride + 2 * p + 2);
          const int16x8_t lo = vmlal_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), vget_low_s8(a1), vget_low_s8(b1));
          const int16x8_t hi = vmlal_high_s8(vmull_high_s8(a0, b0), a1, b1);
          acc[r][0] = vpadalq_s16(acc[r][0], lo);
          acc[r][1] = vpadalq_s16(acc[r][1], hi);
        }
      }
    }
    for (; p < kpairs; ++p) {
      const int8x16_t bv = vld1q_s8(b);
      b += 16;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int8x16_t av = pair_at(a + r * a_stride + 2 * p);
        acc[r][0] = vpadalq_s16(acc[r][0], vmull_s8(vget_low_s8(av), vget_low_s8(bv)));
        acc[r][1] = vpadalq_s16(acc[r][1], vmull_high_s8(av, bv));
      }
    }
  }

  static size_t gemv_row(const GemmWeights& w, const FloatRequantization* fl, size_t kp, const int8_t* a,
                         const int8_t* packed, int8_t* out_row) {
    return neon::gemv_in_groups<PairKernel>(w, fl, kp, a, packed, out_row);
  }

  static void gemv(size_t kp, const int8_t* a, const int8_t* (&b)[kGemvBlocks], size_t ahead, bool negatable,
                   int32x4_t (&acc)[kGemvBlocks][2]) {
    const size_t kpairs = kp / 2;
    size_t p = 0;
    if (negatable) {  // two K pairs per int16 lane, as in tile
      for (; p + 2 <= kpairs; p += 2) {
        const int8x16_t a0 = pair_at(a + 2 * p), a1 = pair_at(a + 2 * p + 2);
        if (ahead && p % 4 == 0) {
          for (size_t q = 0; q < kGemvBlocks; ++q) __builtin_prefetch(b[q] + ahead + 16 * p);
        }
#pragma GCC unroll 4
        for (size_t q = 0; q < kGemvBlocks; ++q) {
          const int8x16_t b0 = vld1q_s8(b[q] + 16 * p), b1 = vld1q_s8(b[q] + 16 * p + 16);
          const int16x8_t lo = vmlal_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), vget_low_s8(a1), vget_low_s8(b1));
          const int16x8_t hi = vmlal_high_s8(vmull_high_s8(a0, b0), a1, b1);
          acc[q][0] = vpadalq_s16(acc[q][0], lo);
          acc[q][1] = vpadalq_s16(acc[q][1], hi);
        }
      }
    }
    for (; p < kpairs; ++p) {
      const int8x16_t av = pair_at(a + 2 * p);
      if (ahead && p % 4 == 0) {  // 16 bytes per pair and panel: a 64-byte line every 4 pairs
        for (size_t q = 0; q < kGemvBlocks; ++q) __builtin_prefetch(b[q] + ahead + 16 * p);
      }
#pragma GCC unroll 4
      for (size_t q = 0; q < kGemvBlocks; ++q) {
        const int8x16_t bv = vld1q_s8(b[q] + 16 * p);
        acc[q][0] = vpadalq_s16(acc[q][0], vmull_s8(vget_low_s8(av), vget_low_s8(bv)));
        acc[q][1] = vpadalq_s16(acc[q][1], vmull_high_s8(av, bv));
      }
    }
  }
};

}  // namespace

void qs8_gemm__neon(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  neon::gemm<PairKernel>(w, a, out, out_stride);
}

}  // namespace edgeinf::qs8
