// NEON GEMM without the dot-product extension (Cortex-A53/A72): 6x8 tiles.
//
// Raw int8 activations times int8 weights: VMULL gives exact int16 products (at most
// 128 * 128), VPADAL adds the pair of K values of each column into int32. The zero
// point enters through the precomputed bias - zero_point * sum(w) start value, which
// is equal modulo 2^32 to the reference accumulator. With no weight of -128, a VMLAL adds
// a second K pair's products to the same int16 lanes first (see tile).
#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "neon_epilogue_inl.h"

namespace edgeinf::qs8 {
namespace {

constexpr size_t kNr = kNeonLayout.nr;
constexpr size_t kMr = kNeonLayout.mr;

template <int R>
void tile(size_t kpairs, const int8_t* a, size_t a_stride, const int8_t* b, const GemmWeights& w, size_t col0,
          size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[R][2];
  const int32x4_t s0 = vld1q_s32(w.bias_minus_zero_point_terms() + col0);
  const int32x4_t s1 = vld1q_s32(w.bias_minus_zero_point_terms() + col0 + 4);
  for (int r = 0; r < R; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
  size_t p = 0;
  if (w.weights_negatable()) {
    // Two K pairs per int16 lane (VMULL then VMLAL) before one VPADAL: |a * w| <= 128 * 127,
    // so two products fit int16 when no weight is -128. Half the VPADALs, which the A53's
    // 64-bit NEON datapath runs in two passes.
    for (; p + 2 <= kpairs; p += 2) {
      const int8x16_t b0 = vld1q_s8(b);
      const int8x16_t b1 = vld1q_s8(b + 16);
      b += 32;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        int16_t pairs[2];
        std::memcpy(pairs, a + r * a_stride + 2 * p, sizeof(pairs));
        const int8x16_t a0 = vreinterpretq_s8_s16(vdupq_n_s16(pairs[0]));
        const int8x16_t a1 = vreinterpretq_s8_s16(vdupq_n_s16(pairs[1]));
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
      int16_t pair;
      std::memcpy(&pair, a + r * a_stride + 2 * p, sizeof(pair));
      const int8x16_t av = vreinterpretq_s8_s16(vdupq_n_s16(pair));
      acc[r][0] = vpadalq_s16(acc[r][0], vmull_s8(vget_low_s8(av), vget_low_s8(bv)));
      acc[r][1] = vpadalq_s16(acc[r][1], vmull_high_s8(av, bv));
    }
  }
  neon::store_tile<R>(acc, w, col0, ncols, out, out_stride);
}

using neon::kGemvBlocks;
static_assert(kNr == neon::kGemvPanelColumns, "GemvPanels assumes 8-column panels");

void gemv_blocks(size_t kpairs, const int8_t* a, const int8_t* panel, size_t panel_bytes, const GemmWeights& w,
                 size_t col0, int8_t* out_row, bool prefetch_next) {
  neon::GemvPanels g(w, col0, panel, panel_bytes);
  auto& acc = g.acc;
  auto& b = g.b;
  const size_t ahead = prefetch_next ? kGemvBlocks * panel_bytes : 0;
  size_t p = 0;
  if (w.weights_negatable()) {  // two K pairs per int16 lane, as in tile
    for (; p + 2 <= kpairs; p += 2) {
      int16_t pairs[2];
      std::memcpy(pairs, a + 2 * p, sizeof(pairs));
      const int8x16_t a0 = vreinterpretq_s8_s16(vdupq_n_s16(pairs[0]));
      const int8x16_t a1 = vreinterpretq_s8_s16(vdupq_n_s16(pairs[1]));
      if (ahead && p % 4 == 0) {
        for (size_t q = 0; q < kGemvBlocks; ++q) __builtin_prefetch(b[q] + ahead + 16 * p);
      }
#pragma GCC unroll 4
      for (size_t q = 0; q < kGemvBlocks; ++q) {
        const int8x16_t b0 = vld1q_s8(b[q] + 16 * p);
        const int8x16_t b1 = vld1q_s8(b[q] + 16 * p + 16);
        const int16x8_t lo = vmlal_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), vget_low_s8(a1), vget_low_s8(b1));
        const int16x8_t hi = vmlal_high_s8(vmull_high_s8(a0, b0), a1, b1);
        acc[q][0][0] = vpadalq_s16(acc[q][0][0], lo);
        acc[q][0][1] = vpadalq_s16(acc[q][0][1], hi);
      }
    }
  }
  for (; p < kpairs; ++p) {
    int16_t pair;
    std::memcpy(&pair, a + 2 * p, sizeof(pair));
    const int8x16_t av = vreinterpretq_s8_s16(vdupq_n_s16(pair));
    if (ahead && p % 4 == 0) {  // 16 bytes per pair and panel: a 64-byte line every 4 pairs
      for (size_t q = 0; q < kGemvBlocks; ++q) __builtin_prefetch(b[q] + ahead + 16 * p);
    }
#pragma GCC unroll 4
    for (size_t q = 0; q < kGemvBlocks; ++q) {
      const int8x16_t bv = vld1q_s8(b[q] + 16 * p);
      acc[q][0][0] = vpadalq_s16(acc[q][0][0], vmull_s8(vget_low_s8(av), vget_low_s8(bv)));
      acc[q][0][1] = vpadalq_s16(acc[q][0][1], vmull_high_s8(av, bv));
    }
  }
  g.store(w, col0, out_row);
}

using TileFn = void (*)(size_t, const int8_t*, size_t, const int8_t*, const GemmWeights&, size_t, size_t, int8_t*,
                        size_t);
constexpr TileFn kTiles[kMr + 1] = {nullptr, &tile<1>, &tile<2>, &tile<3>, &tile<4>, &tile<5>, &tile<6>};

}  // namespace

void qs8_gemm__neon(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  const size_t n = w.n(), kp = round_up(a.k(), kNeonLayout.kpad);
  const int8_t* packed = w.packed(kNeonLayout);
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
        gemv_blocks(kp / 2, abuf, packed + j0 * kp * kNr, kp * kNr, w, j0 * kNr, out + m0 * out_stride,
                    j0 + 2 * kGemvBlocks <= n / kNr);
      }
    }
    for (size_t j = j0; j < blocks; ++j) {
      const int8_t* panel = packed + j * kp * kNr;
      const size_t ncols = std::min(kNr, n - j * kNr);
      for (size_t r0 = 0; r0 < rows; r0 += kMr) {
        const size_t height = std::min(kMr, rows - r0);
        kTiles[height](kp / 2, abuf + r0 * kp, kp, panel, w, j * kNr, ncols, out + (m0 + r0) * out_stride, out_stride);
      }
    }
  }
}

}  // namespace edgeinf::qs8
