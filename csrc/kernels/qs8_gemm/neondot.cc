// NEON GEMM with the Armv8.2 dot-product instructions (Cortex-A76 and later): 8x8 tiles.
//
// Compiled with +dotprod for this file only and selected at run time only when HWCAP
// reports ASIMDDP, so a Cortex-A53/A72 never executes SDOT. SDOT sums four exact int8
// products into each int32 lane; the zero point enters through the bias term as in
// neon.cc, whose driver and epilogue (neon_gemm_inl.h) this file instantiates with its
// own micro-kernel.
#include <arm_neon.h>

#include "gemm.h"
#include "neon_gemm_inl.h"

namespace edgeinf::qs8 {
namespace {

using neon::kGemvBlocks;

struct DotKernel {
  static constexpr PackLayout kLayout = kNeonDotLayout;

  template <int R>
  static void tile(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, bool /*negatable*/,
                   int32x4_t (&acc)[R][2]) {
    for (size_t k0 = 0; k0 < kp; k0 += 16) {
      int8x16_t av[R];
      for (int r = 0; r < R; ++r) av[r] = vld1q_s8(a + r * a_stride + k0);
        // Four quads of K per A load; lane q of av selects quad q.
#define EDGEINF_SDOT_QUAD(q)                                 \
  {                                                          \
    const int8x16_t b0 = vld1q_s8(b), b1 = vld1q_s8(b + 16); \
    b += 32;                                                 \
    for (int r = 0; r < R; ++r) {                            \
      acc[r][0] = vdotq_laneq_s32(acc[r][0], b0, av[r], q);  \
      acc[r][1] = vdotq_laneq_s32(acc[r][1], b1, av[r], q);  \
    }                                                        \
  }
      EDGEINF_SDOT_QUAD(0)
      EDGEINF_SDOT_QUAD(1)
      EDGEINF_SDOT_QUAD(2)
      EDGEINF_SDOT_QUAD(3)
#undef EDGEINF_SDOT_QUAD
    }
  }

  static void gemv(size_t kp, const int8_t* a, const int8_t* (&b)[kGemvBlocks], size_t ahead, bool /*negatable*/,
                   int32x4_t (&acc)[kGemvBlocks][2]) {
    for (size_t k0 = 0; k0 < kp; k0 += 16) {
      const int8x16_t av = vld1q_s8(a + k0);
      if (ahead) {  // 128 bytes per 16 values of K and panel: two 64-byte lines
        for (size_t q = 0; q < kGemvBlocks; ++q) {
          __builtin_prefetch(b[q] + ahead);
          __builtin_prefetch(b[q] + ahead + 64);
        }
      }
#define EDGEINF_SDOT_QUAD(lane)                                    \
  for (size_t q = 0; q < kGemvBlocks; ++q) {                       \
    const int8x16_t b0 = vld1q_s8(b[q]), b1 = vld1q_s8(b[q] + 16); \
    b[q] += 32;                                                    \
    acc[q][0] = vdotq_laneq_s32(acc[q][0], b0, av, lane);          \
    acc[q][1] = vdotq_laneq_s32(acc[q][1], b1, av, lane);          \
  }
      EDGEINF_SDOT_QUAD(0)
      EDGEINF_SDOT_QUAD(1)
      EDGEINF_SDOT_QUAD(2)
      EDGEINF_SDOT_QUAD(3)
#undef EDGEINF_SDOT_QUAD
    }
  }
};

}  // namespace

void qs8_gemm__neondot(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  neon::gemm<DotKernel>(w, a, out, out_stride);
}

}  // namespace edgeinf::qs8
