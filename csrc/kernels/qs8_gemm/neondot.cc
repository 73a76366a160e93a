// NEON GEMM with the Armv8.2 dot-product instructions (Cortex-A76 and later): 8x8 tiles.
//
// Compiled with +dotprod for this file only and selected at run time only when HWCAP
// reports ASIMDDP, so a Cortex-A53/A72 never executes SDOT. SDOT sums four exact int8
// products into each int32 lane; the zero point enters through the bias term as in
// neon.cc.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "neon_epilogue_inl.h"

namespace edgeinf::qs8 {
namespace {

constexpr size_t kNr = kNeonDotLayout.nr;
constexpr size_t kMr = kNeonDotLayout.mr;

template <int R>
void tile(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, const GemmWeights& w, size_t col0, size_t ncols,
          int8_t* out, size_t out_stride) {
  int32x4_t acc[R][2];
  const int32x4_t s0 = vld1q_s32(w.bias_minus_zero_point_terms() + col0);
  const int32x4_t s1 = vld1q_s32(w.bias_minus_zero_point_terms() + col0 + 4);
  for (int r = 0; r < R; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
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
  neon::store_tile<R>(acc, w, col0, ncols, out, out_stride);
}

using neon::kGemvBlocks;
static_assert(kNr == neon::kGemvPanelColumns, "GemvPanels assumes 8-column panels");

void gemv_blocks(size_t kp, const int8_t* a, const int8_t* panel, size_t panel_bytes, const GemmWeights& w, size_t col0,
                 int8_t* out_row, bool prefetch_next) {
  neon::GemvPanels g(w, col0, panel, panel_bytes);
  auto& acc = g.acc;
  auto& b = g.b;
  const size_t ahead = prefetch_next ? kGemvBlocks * panel_bytes : 0;
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
    acc[q][0][0] = vdotq_laneq_s32(acc[q][0][0], b0, av, lane);    \
    acc[q][0][1] = vdotq_laneq_s32(acc[q][0][1], b1, av, lane);    \
  }
    EDGEINF_SDOT_QUAD(0)
    EDGEINF_SDOT_QUAD(1)
    EDGEINF_SDOT_QUAD(2)
    EDGEINF_SDOT_QUAD(3)
#undef EDGEINF_SDOT_QUAD
  }
  g.store(w, col0, out_row);
}

using TileFn = void (*)(size_t, const int8_t*, size_t, const int8_t*, const GemmWeights&, size_t, size_t, int8_t*,
                        size_t);
constexpr TileFn kTiles[kMr + 1] = {nullptr,  &tile<1>, &tile<2>, &tile<3>, &tile<4>,
                                    &tile<5>, &tile<6>, &tile<7>, &tile<8>};

}  // namespace

void qs8_gemm__neondot(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  const size_t n = w.n(), kp = round_up(a.k(), kNeonDotLayout.kpad);
  const int8_t* packed = w.packed(kNeonDotLayout);
  const size_t blocks = (n + kNr - 1) / kNr;
  const size_t fit = std::max<size_t>(kMr, (96 * 1024 / kp) / kMr * kMr);
  const size_t mc = std::min(fit, round_up(a.m, kMr));
  int8_t* abuf = scratch<int8_t, 0>(mc * kp);
  for (size_t m0 = 0; m0 < a.m; m0 += mc) {
    const size_t rows = std::min(mc, a.m - m0);
    gather_rows(a, m0, rows, abuf, kp);
    size_t j0 = 0;
    if (rows == 1) {  // full groups of panels; the rest goes through the tiles
      for (; j0 + kGemvBlocks <= n / kNr; j0 += kGemvBlocks) {
        gemv_blocks(kp, abuf, packed + j0 * kp * kNr, kp * kNr, w, j0 * kNr, out + m0 * out_stride,
                    j0 + 2 * kGemvBlocks <= n / kNr);
      }
    }
    for (size_t j = j0; j < blocks; ++j) {
      const int8_t* panel = packed + j * kp * kNr;
      const size_t ncols = std::min(kNr, n - j * kNr);
      for (size_t r0 = 0; r0 < rows; r0 += kMr) {
        const size_t height = std::min(kMr, rows - r0);
        kTiles[height](kp, abuf + r0 * kp, kp, panel, w, j * kNr, ncols, out + (m0 + r0) * out_stride, out_stride);
      }
    }
  }
}

}  // namespace edgeinf::qs8
