// The NEON GEMM driver, shared by the plain NEON (neon.cc) and the dot-product (neondot.cc)
// micro-kernels: rows of A gathered into per-thread scratch, tiles of up to mr rows by 8
// columns, the batch-1 GEMV over groups of panels, and the epilogue that requantizes 8
// columns of int32 accumulators. A micro-kernel K supplies
//
//   static constexpr PackLayout kLayout;                 // nr = 8
//   template <int R> static void tile(size_t kp, const int8_t* a, size_t a_stride,
//       const int8_t* b, bool negatable, int32x4_t (&acc)[R][2]);   // acc += A rows x panel
//   static size_t gemv_row(const GemmWeights& w, const FloatRequantization* fl, size_t kp,
//       const int8_t* a, const int8_t* packed, int8_t* out_row);
//
// with kp the K of the packed panels (`packed`: kLayout's) and `negatable`
// GemmWeights::weights_negatable(); the rows of A hold kp values (zeros past K), to be read
// no further (in place, the last one ends the caller's buffer). gemv_row computes a single
// row (batch 1) of the first panels, returns how many (the tiles do the rest);
// gemv_in_groups below is one way. A kernel may supply `template <int R> static void
// run_tile(...)` of TileFn's signature instead of tile: the whole tile, requantized and stored.
// Accumulators start at bias - zero_point * sum(w)
// (GemmWeights::bias_minus_zero_point_terms()), as the kernels multiply raw int8 activations.
//
// Include only from aarch64 files. Everything here has internal linkage: each file
// instantiates it under its own compiler flags, and the linker must not pick the +dotprod
// copy of a shared inline function for the plain NEON path.
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../../quant/neon_inl.h"
#include "../../quant/rq_neon_inl.h"
#include "gemm.h"

namespace edgeinf::qs8::neon {
namespace {

constexpr size_t kGemvBlocks = 4;  // panels of the batch-1 GEMV multiplied together
constexpr size_t kNr = 8;          // columns of a panel, of a tile and of the epilogue

// 8 requantized int32 lanes (zero point added, wrapping as the reference's int32 sum) to
// bytes: saturating to int8 first and clamping the 8 bytes after equals clamping in int32,
// the activation range lying within int8; two clamps of 8 lanes instead of four of 4.
inline int8x8_t narrow_clamp(int32x4_t a, int32x4_t b, int8x8_t lo, int8x8_t hi) {
  return vmin_s8(vmax_s8(vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))), lo), hi);
}

// 16 such lanes (v[i]: lanes 4i .. 4i + 3) to bytes, as narrow_clamp: half its narrowing
// and clamping operations per output.
inline int8x16_t narrow_clamp16(int32x4_t v0, int32x4_t v1, int32x4_t v2, int32x4_t v3, int8x16_t lo, int8x16_t hi) {
  const int16x8_t h0 = vqmovn_high_s32(vqmovn_s32(v0), v1), h1 = vqmovn_high_s32(vqmovn_s32(v2), v3);
  return vminq_s8(vmaxq_s8(vqmovn_high_s16(vqmovn_s16(h0), h1), lo), hi);
}

// The requantization of columns [col0, col0 + 8), its parameters held in registers:
// the float form where it was fitted (rq_params.h; FCVTNS saturates as SQXTN does) unless
// it needs the split offsets and every column shifts right, else the double
// requantization of FULLY_CONNECTED, else TFLite's fixed-point steps (kFixedRight's where
// every column shifts right: fewer operations than the split float form, but its SQRDMULH
// takes the integer multiply pipe, so a kernel bound by that pipe passes multiply_bound
// and keeps the split float form).
class Epilogue {
 public:
  Epilogue(const GemmWeights& w, const FloatRequantization* fl, size_t col0, bool multiply_bound = false) {
    const Requantization& rq = w.requantization();
    lo_ = vdup_n_s8(static_cast<int8_t>(std::max<int32_t>(rq.act_min, -128)));
    hi_ = vdup_n_s8(static_cast<int8_t>(std::min<int32_t>(rq.act_max, 127)));
    lo16_ = vcombine_s8(lo_, lo_), hi16_ = vcombine_s8(hi_, hi_);
    zp_ = vdupq_n_s32(rq.output_zero_point);
    zp16_ = vdupq_n_s16(static_cast<int16_t>(rq.output_zero_point));
    if (fl && fl->split && w.shifts_right_only() && !multiply_bound) fl = nullptr;
    if (fl) {
      mode_ = fl->split ? kFloatSplit : kFloat;
      for (int h = 0; h < 2; ++h) {
        p0_[h] = vreinterpretq_s32_f32(vld1q_f32(fl->scale.data() + col0 + 4 * h));
        p1_[h] = vreinterpretq_s32_f32(vld1q_f32(fl->offset.data() + col0 + 4 * h));
        p2_[h] = vreinterpretq_s32_f32(vld1q_f32(fl->offset_neg.data() + col0 + 4 * h));
      }
    } else if (w.requantizes_in_double()) {
      mode_ = kDouble;
      ds_ = w.double_scale() + col0;
    } else {
      mode_ = kFixed;
      for (int h = 0; h < 2; ++h) {
        p0_[h] = vld1q_s32(rq.multiplier.data() + col0 + 4 * h);
        p1_[h] = vld1q_s32(rq.left_shift.data() + col0 + 4 * h);
        p2_[h] = vnegq_s32(vld1q_s32(rq.right_shift.data() + col0 + 4 * h));
      }
      shifts_right_only_ = w.shifts_right_only();
    }
  }

  // kFixedRight: kFixed where every column shifts right and none left (shifts_right_only).
  enum Mode { kFixed, kDouble, kFloat, kFloatSplit, kFixedRight };
  Mode mode() const { return mode_; }

  // The requantization of one row's 8 accumulators, for mode() == M.
  template <Mode M>
  int8x8_t apply(int32x4_t a0, int32x4_t a1) const {
    if constexpr (M == kFloat) {
      return narrow_clamp(neon_rq::float_form(a0, f(p0_[0]), f(p1_[0])), neon_rq::float_form(a1, f(p0_[1]), f(p1_[1])),
                          lo_, hi_);
    } else if constexpr (M == kFloatSplit) {
      return narrow_clamp(neon_rq::float_form_split(a0, f(p0_[0]), f(p1_[0]), f(p2_[0])),
                          neon_rq::float_form_split(a1, f(p0_[1]), f(p1_[1]), f(p2_[1])), lo_, hi_);
    } else if constexpr (M == kDouble) {
      return narrow_clamp(scaled_double(a0, ds_, zp_), scaled_double(a1, ds_ + 4, zp_), lo_, hi_);
    } else if constexpr (M == kFixedRight) {
      return vmin_s8(vmax_s8(vqmovn_s16(mbqm_right8(a0, a1, p0_[0], p0_[1], p2_[0], p2_[1], zp16_)), lo_), hi_);
    } else {
      return narrow_clamp(vaddq_s32(mbqm(a0, p0_[0], p1_[0], p2_[0]), zp_),
                          vaddq_s32(mbqm(a1, p0_[1], p1_[1], p2_[1]), zp_), lo_, hi_);
    }
  }

  // Accumulators of columns col0 + 4h .. col0 + 4h + 3 requantized to int32 with the zero
  // point, not yet clamped.
  template <Mode M>
  int32x4_t lanes(int32x4_t a, int h) const {
    if constexpr (M == kFloat) {
      return neon_rq::float_form(a, f(p0_[h]), f(p1_[h]));
    } else if constexpr (M == kFloatSplit) {
      return neon_rq::float_form_split(a, f(p0_[h]), f(p1_[h]), f(p2_[h]));
    } else if constexpr (M == kDouble) {
      return scaled_double(a, ds_ + 4 * h, zp_);
    } else if constexpr (M == kFixedRight) {
      return vaddq_s32(mbqm_right(a, p0_[h], p2_[h]), zp_);
    } else {
      return vaddq_s32(mbqm(a, p0_[h], p1_[h], p2_[h]), zp_);
    }
  }

  // Mode kFixed, and every column of the 8 shifts right and none left (kFixedRight applies).
  bool shifts_right_only() const { return shifts_right_only_; }

  // The activation range as int8, in 16 lanes.
  int8x16_t lo16() const { return lo16_; }
  int8x16_t hi16() const { return hi16_; }

 private:
  static float32x4_t f(int32x4_t v) { return vreinterpretq_f32_s32(v); }
  Mode mode_;
  // fixed point: multiplier, left shift, -right shift; float: scale, offset, offset_neg
  int32x4_t p0_[2], p1_[2], p2_[2];
  int32x4_t zp_;
  int16x8_t zp16_;
  int8x8_t lo_, hi_;
  const double* ds_ = nullptr;
  int8x16_t lo16_, hi16_;
  bool shifts_right_only_ = false;
};

// The first n < 8 bytes of v stored at o, by lanes of 4, 2 and 1 bytes: a memcpy of a
// variable size is a library call per row, which a layer of 1 to 7 channels left over
// (a detector's score head) pays on every pixel.
inline void store_first(int8x8_t v, size_t n, int8_t* o) {
  if (n & 4) {
    vst1_lane_s32(reinterpret_cast<int32_t*>(o), vreinterpret_s32_s8(v), 0);
    v = vext_s8(v, v, 4), o += 4;
  }
  if (n & 2) {
    vst1_lane_s16(reinterpret_cast<int16_t*>(o), vreinterpret_s16_s8(v), 0);
    v = vext_s8(v, v, 2), o += 2;
  }
  if (n & 1) vst1_lane_s8(o, v, 0);
}

// Rows of accumulators requantized and stored, out + r * out_stride: the mode is decided
// once, each row's conversions independent of the others' (an out-of-order core overlaps
// them, an in-order one interleaves them as scheduled).
template <Epilogue::Mode M, int R>
inline void store_rows_as(const int32x4_t (&acc)[R][2], const Epilogue& e, size_t ncols, int8_t* out,
                          size_t out_stride) {
  int8x8_t bytes[R];
  for (int r = 0; r < R; ++r) bytes[r] = e.apply<M>(acc[r][0], acc[r][1]);
  for (int r = 0; r < R; ++r) {
    int8_t* o = out + r * out_stride;
    if (ncols == kNr) {
      vst1_s8(o, bytes[r]);
    } else {
      store_first(bytes[r], ncols, o);
    }
  }
}

// Inlined into every caller: passed by reference, the accumulators would go through memory.
template <int R>
__attribute__((always_inline)) inline void store_rows(const int32x4_t (&acc)[R][2], const Epilogue& e, size_t ncols,
                                                      int8_t* out, size_t out_stride) {
  switch (e.mode()) {
    case Epilogue::kFloat:
      return store_rows_as<Epilogue::kFloat>(acc, e, ncols, out, out_stride);
    case Epilogue::kFloatSplit:
      return store_rows_as<Epilogue::kFloatSplit>(acc, e, ncols, out, out_stride);
    case Epilogue::kDouble:
      return store_rows_as<Epilogue::kDouble>(acc, e, ncols, out, out_stride);
    default:
      if (e.shifts_right_only()) return store_rows_as<Epilogue::kFixedRight>(acc, e, ncols, out, out_stride);
      return store_rows_as<Epilogue::kFixed>(acc, e, ncols, out, out_stride);
  }
}

template <class K, int R>
void tile(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, bool negatable, const int32_t* start,
          const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
  int32x4_t acc[R][2];
  const int32x4_t s0 = vld1q_s32(start), s1 = vld1q_s32(start + 4);
  for (int r = 0; r < R; ++r) acc[r][0] = s0, acc[r][1] = s1;
  K::template tile<R>(kp, a, a_stride, b, negatable, acc);
  store_rows<R>(acc, e, ncols, out, out_stride);
}

using TileFn = void (*)(size_t, const int8_t*, size_t, const int8_t*, bool, const int32_t*, const Epilogue&, size_t,
                        int8_t*, size_t);

// The tile of R rows: K::run_tile<R> where the micro-kernel requantizes its own tiles
// (TileFn's signature), else tile<K, R>.
template <class K, int R, class = void>
struct TileOf {
  static constexpr TileFn fn = &tile<K, R>;
};
template <class K, int R>
struct TileOf<K, R, std::void_t<decltype(&K::template run_tile<R>)>> {
  static constexpr TileFn fn = &K::template run_tile<R>;
};

// Whether K runs whole panels (every row tile of one panel in one call):
//   static void run_panel(size_t kp, const int8_t* a, size_t a_stride, size_t rows,
//       const int8_t* b, bool negatable, const int32_t* start, const Epilogue& e,
//       size_t ncols, int8_t* out, size_t out_stride);
template <class K, class = void>
constexpr bool kRunsPanels = false;
template <class K>
constexpr bool kRunsPanels<K, std::void_t<decltype(&K::run_panel)>> = true;

// Whether K's loop keeps the integer multiply pipe busy (static constexpr bool
// kMultiplyBound = true): its epilogue then multiplies nothing there (Epilogue).
template <class K, class = void>
constexpr bool kMultiplyBound = false;
template <class K>
constexpr bool kMultiplyBound<K, std::void_t<decltype(K::kMultiplyBound)>> = K::kMultiplyBound;

// tiles[h]: the tile of h rows, h = 1 .. sizeof...(R).
template <class K, size_t... R>
constexpr std::array<TileFn, sizeof...(R) + 1> tile_table(std::index_sequence<R...>) {
  return {nullptr, TileOf<K, static_cast<int>(R) + 1>::fn...};
}

// Rows r0 .. rows of a block against one panel, kMr at a time, by the tile of each height.
template <class K>
void run_tiles(size_t kp, const int8_t* a, size_t a_stride, size_t r0, size_t rows, const int8_t* b, bool negatable,
               const int32_t* start, const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
  constexpr size_t kMr = K::kLayout.mr;
  static constexpr std::array<TileFn, kMr + 1> kTiles = tile_table<K>(std::make_index_sequence<kMr>());
  for (; r0 < rows; r0 += kMr) {
    kTiles[std::min(kMr, rows - r0)](kp, a + r0 * a_stride, a_stride, b, negatable, start, e, ncols,
                                     out + r0 * out_stride, out_stride);
  }
}

// One row (batch-1 fully connected), kGemvBlocks panels at a time, prefetching the next
// group: the weights are read once, usually from memory, and several streams in flight
// move more bytes per second than one (as on AVX2). K supplies
//   static void gemv(size_t kp, const int8_t* a, const int8_t* (&b)[kGemvBlocks],
//       size_t ahead, bool negatable, int32x4_t (&acc)[kGemvBlocks][2]);
// with `ahead` the prefetch distance of the panels in bytes (0: none).
template <class K>
void gemv_group(size_t kp, const int8_t* a, const int8_t* panel, size_t panel_bytes, const GemmWeights& w,
                const FloatRequantization* fl, size_t col0, int8_t* out_row, bool prefetch_next) {
  int32x4_t acc[kGemvBlocks][2];
  const int8_t* b[kGemvBlocks];
  const int32_t* start = w.bias_minus_zero_point_terms() + col0;
  for (size_t q = 0; q < kGemvBlocks; ++q) {
    acc[q][0] = vld1q_s32(start + q * kNr);
    acc[q][1] = vld1q_s32(start + q * kNr + 4);
    b[q] = panel + q * panel_bytes;
  }
  K::gemv(kp, a, b, prefetch_next ? kGemvBlocks * panel_bytes : 0, w.weights_negatable(), acc);
  for (size_t q = 0; q < kGemvBlocks; ++q) {
    const int32x4_t row[1][2] = {{acc[q][0], acc[q][1]}};
    store_rows<1>(row, Epilogue(w, fl, col0 + q * kNr), kNr, out_row + col0 + q * kNr, 0);
  }
}

// The full groups of kGemvBlocks panels of one row by gemv_group; returns the panels done.
template <class K>
size_t gemv_in_groups(const GemmWeights& w, const FloatRequantization* fl, size_t kp, const int8_t* a,
                      const int8_t* packed, int8_t* out_row) {
  const size_t full = w.n() / kNr;
  size_t j0 = 0;
  for (; j0 + kGemvBlocks <= full; j0 += kGemvBlocks) {
    gemv_group<K>(kp, a, packed + j0 * kp * kNr, kp * kNr, w, fl, j0 * kNr, out_row, j0 + 2 * kGemvBlocks <= full);
  }
  return j0;
}

// The distance between consecutive rows of A where the tiles can read them in place (one
// segment of exactly kp values a row, evenly spaced as the caller says), else 0: for the
// few channels of a narrow layer the copy into scratch costs more than its multiplies.
inline size_t in_place_stride(const GemmRows& a, size_t kp) {
  return a.taps == 1 && a.seg == kp && a.stride >= kp ? a.stride : 0;
}

template <class K>
void gemm(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  static_assert(K::kLayout.nr == kNr, "the epilogue and the GEMV take 8-column panels");
  constexpr size_t kMr = K::kLayout.mr;
  const size_t n = w.n(), kp = round_up(a.k(), K::kLayout.kpad);
  const int8_t* packed = w.packed(K::kLayout);
  const FloatRequantization* fl = neon_rq::usable(w.float_requantization());
  const bool negatable = w.weights_negatable();
  const size_t blocks = (n + kNr - 1) / kNr;
  const size_t fit = std::max<size_t>(kMr, (96 * 1024 / kp) / kMr * kMr);
  const size_t mc = std::min(fit, round_up(a.m, kMr));
  const size_t in_place = in_place_stride(a, kp);
  const size_t a_stride = in_place ? in_place : kp;
  int8_t* abuf = in_place ? nullptr : scratch<int8_t, 0>(mc * kp);
  for (size_t m0 = 0; m0 < a.m; m0 += mc) {
    const size_t rows = std::min(mc, a.m - m0);
    const int8_t* ablock = abuf;
    if (in_place) {
      ablock = a.ptrs[m0];
    } else {
      gather_rows(a, m0, rows, abuf, kp);
    }
    const size_t j0 = rows == 1 ? K::gemv_row(w, fl, kp, ablock, packed, out + m0 * out_stride) : 0;
    for (size_t j = j0; j < blocks; ++j) {
      const int8_t* panel = packed + j * kp * kNr;
      const size_t col0 = j * kNr, ncols = std::min(kNr, n - col0);
      const Epilogue e(w, fl, col0, kMultiplyBound<K>);
      const int32_t* start = w.bias_minus_zero_point_terms() + col0;
      if constexpr (kRunsPanels<K>) {
        K::run_panel(kp, ablock, a_stride, rows, panel, negatable, start, e, ncols, out + m0 * out_stride + col0,
                     out_stride);
      } else {
        run_tiles<K>(kp, ablock, a_stride, 0, rows, panel, negatable, start, e, ncols, out + m0 * out_stride + col0,
                     out_stride);
      }
    }
  }
}

}  // namespace
}  // namespace edgeinf::qs8::neon
