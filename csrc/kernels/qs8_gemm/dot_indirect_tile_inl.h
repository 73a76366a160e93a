// The VPDPBUSD micro-kernel of an indirect convolution (dot_gemm.h's DotIndirectTile), over
// the same ops struct D as dot_tile_inl.h: a tile of R output pixels by C panels of 16
// output channels whose K runs over the filter taps given, each tap's kquads quads of
// input channels read in place at the pixel's window origin plus the tap's offset (no
// window is copied), its weights at the tap's offset in each panel.
// Per quad, C panel loads and R broadcasts feed R * C independent VPDPBUSD chains, as in
// dot_tile.
//
// Include only from the files that instantiate it: everything here has internal linkage,
// compiled under each file's own instruction set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "dot_gemm.h"

namespace edgeinf::qs8 {
namespace {

template <class D, int R, int C>
void dot_indirect_tile(const uint8_t* const* origins, const DotTap* taps, size_t tap_count, size_t kquads,
                       const int8_t* panel, size_t panel_bytes, const int32_t* start, int32_t* acc, size_t acc_stride,
                       const DotOutput* fused, int8_t* const* out_rows) {
  using Acc = typename D::Acc;
  using Panel = typename D::Panel;
  Acc c[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < C; ++j) c[r][j] = D::load(start + 16 * j);
  }
  // Wrapping sums: the odd quads' accumulators of few-chain tiles add in at the end.
  [[maybe_unused]] Acc d[R * C <= 4 ? R : 1][R * C <= 4 ? C : 1];
  if constexpr (R * C <= 4) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) d[r][j] = D::zero();
    }
  }
  const int8_t* const panels = panel;
  for (size_t t = 0; t < tap_count; ++t) {
    const ptrdiff_t offset = taps[t].input;
    panel = panels + taps[t].weights;
    const uint8_t* a[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) a[r] = origins[r] + offset;
    size_t p = 0;
    if constexpr (R * C <= 4) {
      // Few chains (a tail of pixels, a layer of one pixel): a second set of accumulators
      // for the odd quads, as in dot_tile.
      for (; p + 2 <= kquads; p += 2) {
        Panel w0[C], w1[C];
#pragma GCC unroll 4
        for (int j = 0; j < C; ++j) {
          w0[j] = D::load_panel(panel + j * panel_bytes + 64 * p);
          w1[j] = D::load_panel(panel + j * panel_bytes + 64 * p + 64);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const auto q0 = D::broadcast(a[r] + 4 * p), q1 = D::broadcast(a[r] + 4 * p + 4);
#pragma GCC unroll 4
          for (int j = 0; j < C; ++j) {
            c[r][j] = D::dot(c[r][j], q0, w0[j]);
            d[r][j] = D::dot(d[r][j], q1, w1[j]);
          }
        }
      }
    }
#pragma GCC unroll 2
    for (; p < kquads; ++p) {
      Panel w[C];
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) w[j] = D::load_panel(panel + j * panel_bytes + 64 * p);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const auto q = D::broadcast(a[r] + 4 * p);
#pragma GCC unroll 4
        for (int j = 0; j < C; ++j) c[r][j] = D::dot(c[r][j], q, w[j]);
      }
    }
  }
  if constexpr (R * C <= 4) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) c[r][j] = D::add(c[r][j], d[r][j]);
    }
  }
  if constexpr (D::kRequantizes) {
    if (fused != nullptr) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) {
        const typename D::Requantizer rq(*fused, j);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) rq.store(c[r][j], out_rows[r] + 16 * j);
        if constexpr (D::kRechecks) {  // the rare panel whose outputs need the exact steps again
          if (__builtin_expect(rq.unsure(), 0)) {
            for (int r = 0; r < R; ++r) rq.store_exact(c[r][j], out_rows[r] + 16 * j);
          }
        }
      }
      return;
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < C; ++j) D::store(acc + j * acc_stride + 16 * r, c[r][j]);
  }
}

template <class D, int Mr, int Nc, int R, int C>
constexpr DotIndirectTile indirect_tile_up_to() {
  if constexpr (R <= Mr && C <= Nc) {
    return &dot_indirect_tile<D, R, C>;
  } else {
    return nullptr;
  }
}

template <class D, int Mr, int Nc, int C, size_t... R>
constexpr DotIndirectTileRow indirect_tile_row(std::index_sequence<R...>) {
  return DotIndirectTileRow{{indirect_tile_up_to<D, Mr, Nc, static_cast<int>(R), C>()...}};
}

// The indirect tiles of 1 to Mr pixels by 1 to Nc panels.
template <class D, size_t Mr, size_t Nc>
constexpr DotIndirectTiles dot_indirect_tiles() {
  static_assert(Mr >= 1 && Mr <= kDotMaxRows && Nc >= 1 && Nc <= kDotMaxPanels);
  constexpr auto rows = std::make_index_sequence<kDotMaxRows + 1>();
  constexpr int m = static_cast<int>(Mr), n = static_cast<int>(Nc);
  return DotIndirectTiles{
      Mr,
      Nc,
      {DotIndirectTileRow{}, indirect_tile_row<D, m, n, 1>(rows), indirect_tile_row<D, m, n, 2>(rows),
       indirect_tile_row<D, m, n, 3>(rows), indirect_tile_row<D, m, n, 4>(rows)},
      D::kRequantizes};
}

}  // namespace
}  // namespace edgeinf::qs8
