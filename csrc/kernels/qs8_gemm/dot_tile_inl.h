// The VPDPBUSD micro-kernel (dot_gemm.h's DotTile), written once over an ops struct D:
//
//   struct D {
//     using Acc = ...;    // 16 int32 columns
//     using Panel = ...;  // one quad of K of a panel's 16 columns (64 bytes)
//     using Quad = ...;   // four activation bytes, broadcast
//     static Acc load(const int32_t* p);  static void store(int32_t* p, Acc v);
//     static Acc zero();  static Acc add(Acc x, Acc y);
//     static Panel load_panel(const int8_t* p);
//     static Quad broadcast(const uint8_t* quad);
//     static Acc dot(Acc acc, Quad a, Panel w);  // += a x w, four products per lane
//     static constexpr bool kRequantizes;  // with, if true:
//     struct Requantizer { Requantizer(const DotOutput&, int panel); void store(Acc, int8_t*) const; };
//     static constexpr bool kRechecks;  // and then, if true, Requantizer has:
//       bool unsure() const;                    // some store() may have been inexact: ...
//       void store_exact(Acc, int8_t*) const;   // ... each of the panel's rows again
//   };
//
// A tile is R rows by C panels of 16 columns: per quad of K, C panel loads and R
// broadcasts feed R * C independent VPDPBUSD chains, enough to cover the instruction's
// latency at its full throughput.
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
void dot_tile(const uint8_t* a, size_t a_stride, size_t kquads, const int8_t* panel, size_t panel_bytes,
              const int32_t* start, int32_t* acc, size_t acc_stride, const DotOutput* fused) {
  using Acc = typename D::Acc;
  using Panel = typename D::Panel;
  Acc c[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < C; ++j) c[r][j] = D::load(start + 16 * j);
  }
  size_t p = 0;
  if constexpr (R * C <= 4) {
    // Few chains: a second set of accumulators (odd quads) keeps twice as many VPDPBUSD in
    // flight; wrapping sums may be added in any order.
    Acc d[R][C];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) d[r][j] = D::zero();
    }
    for (; p + 2 <= kquads; p += 2) {
      Panel w0[C], w1[C];
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) {
        w0[j] = D::load_panel(panel + j * panel_bytes + 64 * p);
        w1[j] = D::load_panel(panel + j * panel_bytes + 64 * p + 64);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const auto q0 = D::broadcast(a + r * a_stride + 4 * p), q1 = D::broadcast(a + r * a_stride + 4 * p + 4);
#pragma GCC unroll 4
        for (int j = 0; j < C; ++j) {
          c[r][j] = D::dot(c[r][j], q0, w0[j]);
          d[r][j] = D::dot(d[r][j], q1, w1[j]);
        }
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) c[r][j] = D::add(c[r][j], d[r][j]);
    }
  }
#pragma GCC unroll 2
  for (; p < kquads; ++p) {
    Panel w[C];
#pragma GCC unroll 4
    for (int j = 0; j < C; ++j) w[j] = D::load_panel(panel + j * panel_bytes + 64 * p);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const auto q = D::broadcast(a + r * a_stride + 4 * p);
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) c[r][j] = D::dot(c[r][j], q, w[j]);
    }
  }
  if constexpr (D::kRequantizes) {
    if (fused != nullptr) {
#pragma GCC unroll 4
      for (int j = 0; j < C; ++j) {
        const typename D::Requantizer rq(*fused, j);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) rq.store(c[r][j], fused->out + r * fused->out_stride + 16 * j);
        if constexpr (D::kRechecks) {  // the rare panel whose outputs need the exact steps again
          if (__builtin_expect(rq.unsure(), 0)) {
            for (int r = 0; r < R; ++r) rq.store_exact(c[r][j], fused->out + r * fused->out_stride + 16 * j);
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
constexpr DotTile tile_up_to() {
  if constexpr (R <= Mr && C <= Nc) {
    return &dot_tile<D, R, C>;
  } else {
    return nullptr;
  }
}

template <class D, int Mr, int Nc, int C, size_t... R>
constexpr DotTileRow tile_row(std::index_sequence<R...>) {
  return DotTileRow{{tile_up_to<D, Mr, Nc, static_cast<int>(R), C>()...}};
}

// The tiles of 1 to Mr rows by 1 to Nc panels.
template <class D, size_t Mr, size_t Nc>
constexpr DotTiles dot_tiles() {
  static_assert(Mr >= 1 && Mr <= kDotMaxRows && Nc >= 1 && Nc <= kDotMaxPanels);
  constexpr auto rows = std::make_index_sequence<kDotMaxRows + 1>();
  constexpr int m = static_cast<int>(Mr), n = static_cast<int>(Nc);
  return DotTiles{Mr,
                  Nc,
                  {DotTileRow{}, tile_row<D, m, n, 1>(rows), tile_row<D, m, n, 2>(rows), tile_row<D, m, n, 3>(rows),
                   tile_row<D, m, n, 4>(rows)},
                  D::kRequantizes};
}

}  // namespace
}  // namespace edgeinf::qs8
