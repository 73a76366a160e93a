// NEON GEMM without the dot-product extension (Cortex-A53/A72): 6x8 tiles of broadcast K
// pairs (PairKernel); on out-of-order cores, 3x8 tiles of 16 K values a row (K16Kernel)
// from K = kLongK.
//
// Raw int8 activations times int8 weights: VMULL gives exact int16 products (at most
// 128 * 128), VPADAL adds the pair of K values of each column into int32. The zero
// point enters through the precomputed bias - zero_point * sum(w) start value, which
// is equal modulo 2^32 to the reference accumulator. With no weight of -128, a VMLAL adds
// a second K pair's products to the same int16 lanes first (see tile). The driver and the
// epilogue are neon_gemm_inl.h's.
#include <arm_neon.h>

#include <cstring>

#include "../../dispatch.h"
#include "gemm.h"
#include "neon_gemm_inl.h"

namespace edgeinf::qs8 {
namespace {

using neon::kGemvBlocks;
using neon::kNr;

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

// 16 K values of each row against 16 of each column (kNeonK16Layout): VMULL and VMLAL2 of
// whole registers, VPADAL into one accumulator per row and column, whose 4 lanes are added
// once at the end. No broadcast of A, whose DUP the A72 issues on the NEON pipes beside the
// multiplies; the end costs 6 VPADDs a row, paid back where K is long (kLongK).
struct K16Kernel {
  static constexpr PackLayout kLayout = kNeonK16Layout;
  // two multiplies a K value of a row and column, all on the A72's one multiply pipe
  static constexpr bool kMultiplyBound = true;

  // neon::gemm's panel: every tile of `rows` rows against one panel, requantized and stored
  // here. One call a panel, and one function from the start values to the stores, so the
  // accumulators stay in registers (the scheduling attribute keeps GCC from inlining a
  // function into a caller without it).
  static void run_panel(size_t kp, const int8_t* a, size_t a_stride, size_t rows, const int8_t* b, bool negatable,
                        const int32_t* start, const neon::Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
    if (negatable) {
      panel<true>(kp, a, a_stride, rows, b, start, e, ncols, out, out_stride);
    } else {
      panel<false>(kp, a, a_stride, rows, b, start, e, ncols, out, out_stride);
    }
  }

  // A single row runs as tiles of one row.
  static size_t gemv_row(const GemmWeights&, const FloatRequantization*, size_t, const int8_t*, const int8_t*,
                         int8_t*) {
    return 0;
  }

 private:
  static constexpr int kMr = kLayout.mr;

  template <bool kPaired>
  __attribute__((optimize("no-schedule-insns"))) static void panel(size_t kp, const int8_t* a, size_t a_stride,
                                                                   size_t rows, const int8_t* b, const int32_t* start,
                                                                   const neon::Epilogue& e, size_t ncols, int8_t* out,
                                                                   size_t out_stride) {
    size_t r0 = 0;
    for (; r0 + kMr <= rows; r0 += kMr) {
      tile<kMr, kPaired>(kp, a + r0 * a_stride, a_stride, b, start, e, ncols, out + r0 * out_stride, out_stride);
    }
    static_assert(kMr == 3, "the rows left over are 1 or 2");
    if (rows - r0 == 2)
      tile<2, kPaired>(kp, a + r0 * a_stride, a_stride, b, start, e, ncols, out + r0 * out_stride, out_stride);
    if (rows - r0 == 1)
      tile<1, kPaired>(kp, a + r0 * a_stride, a_stride, b, start, e, ncols, out + r0 * out_stride, out_stride);
  }

  // R rows against the panel, from the start values to the stores. kPaired: two products
  // per int16 lane (VMULL then VMLAL2), as PairKernel's. In source order: GCC's scheduling
  // before register allocation would start all 16 products of a step before adding any,
  // which spills the accumulators.
  template <int R, bool kPaired>
  __attribute__((always_inline, optimize("no-schedule-insns"))) static inline void tile(
      size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, const int32_t* start, const neon::Epilogue& e,
      size_t ncols, int8_t* out, size_t out_stride) {
    int32x4_t s[R][kNr];
    step<R, kPaired, true>(a, a_stride, b, s);
    size_t k = 16;
    do {  // kp >= 32 (kLongK): no path around the loop, which would keep s in memory
      step<R, kPaired, false>(a + k, a_stride, b + k * kNr, s);
      k += 16;
    } while (k < kp);
    const int32x4_t start0 = vld1q_s32(start), start1 = vld1q_s32(start + 4);
    int32x4_t acc[R][2];
    for (int r = 0; r < R; ++r) {
      const int32x4_t s01 = vpaddq_s32(s[r][0], s[r][1]), s23 = vpaddq_s32(s[r][2], s[r][3]);
      const int32x4_t s45 = vpaddq_s32(s[r][4], s[r][5]), s67 = vpaddq_s32(s[r][6], s[r][7]);
      acc[r][0] = vaddq_s32(start0, vpaddq_s32(s01, s23));
      acc[r][1] = vaddq_s32(start1, vpaddq_s32(s45, s67));
    }
    neon::store_rows<R>(acc, e, ncols, out, out_stride);
  }

  // 16 K values of R rows by the 8 columns of b; kFirst: the first, which starts s.
  template <int R, bool kPaired, bool kFirst>
  __attribute__((always_inline, optimize("no-schedule-insns"))) static inline void step(const int8_t* a,
                                                                                        size_t a_stride,
                                                                                        const int8_t* b,
                                                                                        int32x4_t (&s)[R][kNr]) {
    int8x16_t av[R];
    for (int r = 0; r < R; ++r) av[r] = vld1q_s8(a + r * a_stride);
#pragma GCC unroll 8
    for (size_t c = 0; c < kNr; ++c) {
      const int8x16_t bv = vld1q_s8(b + 16 * c);
      int16x8_t lo[R], hi[R];
      for (int r = 0; r < R; ++r) lo[r] = vmull_s8(vget_low_s8(av[r]), vget_low_s8(bv));
      if constexpr (kPaired) {
        for (int r = 0; r < R; ++r) lo[r] = vmlal_high_s8(lo[r], av[r], bv);
      } else {
        for (int r = 0; r < R; ++r) hi[r] = vmull_high_s8(av[r], bv);
      }
      for (int r = 0; r < R; ++r) {
        s[r][c] = kFirst ? vpaddlq_s16(lo[r]) : vpadalq_s16(s[r][c], lo[r]);
        if constexpr (!kPaired) s[r][c] = vpadalq_s16(s[r][c], hi[r]);
      }
    }
  }
};

// The K from which K16Kernel runs in place of PairKernel, on out-of-order cores only: the
// A72 issues PairKernel's broadcasts on the NEON pipes beside its multiplies, while the
// in-order A53 stalls on K16Kernel's chains of multiply-accumulates (docs/arm64.md,
// "The A72 under llvm-mca").
constexpr size_t kLongK = 32;
static_assert(kLongK > 16, "K16Kernel::tile takes two steps of K at least");

}  // namespace

void qs8_gemm__neon(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  if (a.k() >= kLongK && cpu_info().arm_out_of_order) {
    neon::gemm<K16Kernel>(w, a, out, out_stride);
  } else {
    neon::gemm<PairKernel>(w, a, out, out_stride);
  }
}

}  // namespace edgeinf::qs8
