// The VPDPBUSD micro-kernel (dot_gemm.h's DotTile), written once over an ops struct D:
//
//   struct D {
//     using Acc = ...;  // 16 int32 columns
//     using Panel = ...;  // one quad of K of the panel's 16 columns (64 bytes)
//     static Acc load(const int32_t* p);  static void store(int32_t* p, Acc v);
//     static Acc zero();  static Acc add(Acc x, Acc y);
//     static Panel load_panel(const int8_t* p);
//     static Acc dot(Acc acc, const uint8_t* quad, Panel w);  // += quad (broadcast) x w
//   };
//
// Include only from the files that instantiate it: everything here has internal linkage,
// compiled under each file's own instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dot_gemm.h"

namespace edgeinf::qs8 {
namespace {

template <class D, int R>
void dot_tile(const uint8_t* a, size_t a_stride, size_t kquads, const int8_t* panel, const int32_t* start,
              int32_t* acc) {
  using Acc = typename D::Acc;
  Acc c[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) c[r] = D::load(start);
  size_t p = 0;
  if constexpr (R <= 2) {
    // Few rows: a second set of accumulators (odd quads) keeps two chains of VPDPBUSD per
    // register in flight; wrapping sums may be added in any order.
    Acc d[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) d[r] = D::zero();
    for (; p + 2 <= kquads; p += 2) {
      const auto w0 = D::load_panel(panel + 64 * p), w1 = D::load_panel(panel + 64 * p + 64);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        c[r] = D::dot(c[r], a + r * a_stride + 4 * p, w0);
        d[r] = D::dot(d[r], a + r * a_stride + 4 * p + 4, w1);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) c[r] = D::add(c[r], d[r]);
  }
  for (; p < kquads; ++p) {
    const auto w = D::load_panel(panel + 64 * p);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) c[r] = D::dot(c[r], a + r * a_stride + 4 * p, w);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) D::store(acc + 16 * r, c[r]);
}

template <class D, size_t Mr, int R>
constexpr DotTile tile_up_to() {
  if constexpr (R <= static_cast<int>(Mr)) {
    return &dot_tile<D, R>;
  } else {
    return nullptr;
  }
}

// The tiles of 1 to Mr rows.
template <class D, size_t Mr>
constexpr DotTiles dot_tiles() {
  static_assert(Mr >= 1 && Mr <= kDotMaxRows);
  return DotTiles{
      Mr,
      {nullptr, tile_up_to<D, Mr, 1>(), tile_up_to<D, Mr, 2>(), tile_up_to<D, Mr, 3>(), tile_up_to<D, Mr, 4>(),
       tile_up_to<D, Mr, 5>(), tile_up_to<D, Mr, 6>(), tile_up_to<D, Mr, 7>(), tile_up_to<D, Mr, 8>()}};
}

}  // namespace
}  // namespace edgeinf::qs8
