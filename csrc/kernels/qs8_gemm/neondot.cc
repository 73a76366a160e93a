// NEON GEMM with the Armv8.2 dot-product instructions (Cortex-A76 and later): 8x8 tiles,
// and a batch-1 GEMV over panels of 32 columns.
//
// Compiled with +dotprod for this file only and selected at run time only when HWCAP
// reports ASIMDDP, so a Cortex-A53/A72 never executes SDOT. SDOT sums four exact int8
// products into each int32 lane; the zero point enters through the bias term as in
// neon.cc, whose driver and epilogue (neon_gemm_inl.h) this file instantiates with its
// own micro-kernel.
#include <arm_neon.h>

#include <algorithm>
#include <cstring>

#include "gemm.h"
#include "neon_gemm_inl.h"

namespace edgeinf::qs8 {
namespace {

using neon::Epilogue;

constexpr size_t kRowCols = kNeonDotRowLayout.nr;  // 32

// 16 values of K of the row (av) against the next 512 bytes of a panel of
// kNeonDotRowLayout (32 columns, quads of K: 128 bytes a quad), advancing b past them;
// c[j] holds columns 4j .. 4j + 3. Each pair of registers in one LDP (the first one
// post-indexed), and nothing else but the 32 SDOTs: written out, because GCC's
// scheduling and register allocation of the same intrinsics split the pairs into single
// loads and shuffle the accumulators with register moves, which take the SDOTs' pipes.
inline void row_step(int8x16_t av, const int8_t*& b, int32x4_t (&c)[8]) {
  int8x16_t w0, w1, w2, w3, w4, w5, w6, w7;
  // one quad of K: its four LDPs (addresses m0-m3), then eight SDOTs by lane L of av
#define EDGEINF_ROW_QUAD(L, m0, m1, m2, m3)                                          \
  "ldp %q[w0], %q[w1], " m0 "\n\tldp %q[w2], %q[w3], " m1                            \
  "\n\t"                                                                             \
  "ldp %q[w4], %q[w5], " m2 "\n\tldp %q[w6], %q[w7], " m3                            \
  "\n\t"                                                                             \
  "sdot %[c0].4s, %[w0].16b, %[a].4b[" L "]\n\tsdot %[c1].4s, %[w1].16b, %[a].4b[" L \
  "]\n\t"                                                                            \
  "sdot %[c2].4s, %[w2].16b, %[a].4b[" L "]\n\tsdot %[c3].4s, %[w3].16b, %[a].4b[" L \
  "]\n\t"                                                                            \
  "sdot %[c4].4s, %[w4].16b, %[a].4b[" L "]\n\tsdot %[c5].4s, %[w5].16b, %[a].4b[" L \
  "]\n\t"                                                                            \
  "sdot %[c6].4s, %[w6].16b, %[a].4b[" L "]\n\tsdot %[c7].4s, %[w7].16b, %[a].4b[" L "]\n\t"
#define EDGEINF_ROW_STEP                                                                    \
  EDGEINF_ROW_QUAD("0", "[%[b]], #512", "[%[b], #-480]", "[%[b], #-448]", "[%[b], #-416]")  \
  EDGEINF_ROW_QUAD("1", "[%[b], #-384]", "[%[b], #-352]", "[%[b], #-320]", "[%[b], #-288]") \
  EDGEINF_ROW_QUAD("2", "[%[b], #-256]", "[%[b], #-224]", "[%[b], #-192]", "[%[b], #-160]") \
  EDGEINF_ROW_QUAD("3", "[%[b], #-128]", "[%[b], #-96]", "[%[b], #-64]", "[%[b], #-32]")
  __asm__(EDGEINF_ROW_STEP
          : [c0] "+w"(c[0]), [c1] "+w"(c[1]), [c2] "+w"(c[2]), [c3] "+w"(c[3]), [c4] "+w"(c[4]), [c5] "+w"(c[5]),
            [c6] "+w"(c[6]), [c7] "+w"(c[7]), [b] "+r"(b), [w0] "=&w"(w0), [w1] "=&w"(w1), [w2] "=&w"(w2),
            [w3] "=&w"(w3), [w4] "=&w"(w4), [w5] "=&w"(w5), [w6] "=&w"(w6), [w7] "=&w"(w7)
          : [a] "w"(av), "m"(*reinterpret_cast<const int8_t(*)[512]>(b)));
#undef EDGEINF_ROW_STEP
#undef EDGEINF_ROW_QUAD
}

// One row against a whole panel of kNeonDotRowLayout; acc[j]: columns 4j .. 4j + 3.
inline void row_panel(size_t kp, const int8_t* a, const int8_t* b, int32x4_t (&acc)[8]) {
  int32x4_t c[8];
  for (int j = 0; j < 8; ++j) c[j] = acc[j];
  size_t k0 = 0;
  if (kp % 32) row_step(vld1q_s8(a), b, c), k0 = 16;  // an odd 16 values of K first
  for (; k0 < kp; k0 += 32) {                         // then two steps an iteration
    row_step(vld1q_s8(a + k0), b, c);
    row_step(vld1q_s8(a + k0 + 16), b, c);
  }
  for (int j = 0; j < 8; ++j) acc[j] = c[j];
}

// One row against the narrower last panel of kNeonDotRowLayout: G groups of 8 columns
// (G < 4), acc[2g], acc[2g + 1] the columns of group g. The four lanes of av go into
// separate sums (two where G = 3, for the registers), added at the end: one chain of
// SDOTs into each accumulator would wait for each SDOT's result.
template <int G>
void row_tail(size_t kp, const int8_t* a, const int8_t* b, int32x4_t (&acc)[8]) {
  constexpr int kSums = G == 3 ? 2 : 4;
  int32x4_t sum[kSums][2 * G];
  for (int l = 0; l < kSums; ++l) {
    for (int j = 0; j < 2 * G; ++j) sum[l][j] = l == 0 ? acc[j] : vdupq_n_s32(0);
  }
  for (size_t k0 = 0; k0 < kp; k0 += 16) {
    const int8x16_t av = vld1q_s8(a + k0);
#define EDGEINF_TAIL_QUAD(lane)                                                                               \
  for (int g = 0; g < G; ++g, b += 32) {                                                                      \
    sum[lane % kSums][2 * g] = vdotq_laneq_s32(sum[lane % kSums][2 * g], vld1q_s8(b), av, lane);              \
    sum[lane % kSums][2 * g + 1] = vdotq_laneq_s32(sum[lane % kSums][2 * g + 1], vld1q_s8(b + 16), av, lane); \
  }
    EDGEINF_TAIL_QUAD(0)
    EDGEINF_TAIL_QUAD(1)
    EDGEINF_TAIL_QUAD(2)
    EDGEINF_TAIL_QUAD(3)
#undef EDGEINF_TAIL_QUAD
  }
  for (int j = 0; j < 2 * G; ++j) {
    acc[j] = sum[0][j];
    for (int l = 1; l < kSums; ++l) acc[j] = vaddq_s32(acc[j], sum[l][j]);
  }
}

// A panel's accumulators (acc[j]: columns c0 + 4j .. c0 + 4j + 3) requantized and stored,
// the columns from n on left out (a panel within n: no checks). The float form requantizes
// 16 columns at a time with its parameters in registers (Requantize16Of); without it, the
// epilogue's 8.
template <neon_rq::Form F>
__attribute__((always_inline)) inline void store_panel(const GemmWeights& w, const neon_rq::Output& q,
                                                       const int32x4_t (&acc)[8], size_t c0, int8_t* out_row) {
  const size_t n = w.n();
  if (F != neon_rq::Form::kFixedPoint && c0 + kRowCols <= n) {  // every column stored: no checks
    vst1q_s8(out_row + c0, neon_rq::Requantize16Of<F>(q, c0)({acc[0], acc[1], acc[2], acc[3]}));
    vst1q_s8(out_row + c0 + 16, neon_rq::Requantize16Of<F>(q, c0 + 16)({acc[4], acc[5], acc[6], acc[7]}));
    return;
  }
  for (size_t h = 0; h < kRowCols && c0 + h < n; h += 16) {
    const int32x4_t part[4] = {acc[h / 4], acc[h / 4 + 1], acc[h / 4 + 2], acc[h / 4 + 3]};
    if constexpr (F == neon_rq::Form::kFixedPoint) {  // no float form: the epilogue, 8 columns at a time
      for (size_t e = 0; e < 16 && c0 + h + e < n; e += 8) {
        const int32x4_t row[1][2] = {{part[e / 4], part[e / 4 + 1]}};
        neon::store_rows<1>(row, neon::Epilogue(w, nullptr, c0 + h + e), std::min<size_t>(8, n - c0 - h - e),
                            out_row + c0 + h + e, 0);
      }
    } else {
      neon::store_prefix(out_row + c0 + h, neon_rq::Requantize16Of<F>(q, c0 + h)(part),
                         std::min<size_t>(16, n - c0 - h));
    }
  }
}

// The batch-1 GEMV: every column, 32 at a time, then the last panel's columns rounded up
// to 8 (apart, so that the full panels' accumulators stay in registers). The panels follow
// each other in memory, so the weights are one sequential stream (for the hardware
// prefetcher; software prefetches would take a fifth of the loop's issue slots).
template <neon_rq::Form F>
void gemv_all(const GemmWeights& w, const FloatRequantization* fl, size_t kp, const int8_t* a, int8_t* out_row) {
  const size_t n = w.n(), padded = round_up(n, 16);
  const int8_t* panel = w.packed(kNeonDotRowLayout);
  const int32_t* start = w.bias_minus_zero_point_terms();
  const neon_rq::Output q(w.requantization(), fl);
  size_t c0 = 0;
  // a full panel's start values lie within the bias, padded to 16 columns
  for (; c0 < n && kNeonDotRowLayout.panel_width(c0 / kRowCols, n) == kRowCols; c0 += kRowCols) {
    int32x4_t acc[8];
    for (int j = 0; j < 8; ++j) acc[j] = vld1q_s32(start + c0 + 4 * j);
    row_panel(kp, a, panel, acc);
    panel += kp * kRowCols;
    store_panel<F>(w, q, acc, c0, out_row);
  }
  if (c0 == n) return;
  // the last panel: columns past the padded bias start at zero and are not stored
  int32_t s[kRowCols] = {};
  std::memcpy(s, start + c0, (padded - c0) * sizeof(int32_t));
  int32x4_t acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = vld1q_s32(s + 4 * j);
  switch (kNeonDotRowLayout.panel_width(c0 / kRowCols, n) / 8) {
    case 1:
      row_tail<1>(kp, a, panel, acc);
      break;
    case 2:
      row_tail<2>(kp, a, panel, acc);
      break;
    default:
      row_tail<3>(kp, a, panel, acc);
  }
  store_panel<F>(w, q, acc, c0, out_row);
}

// 4 values of K into the low lane of a register by one scalar-FP load (LDR S): the last
// quad of a row read in place ends the caller's buffer, and a lane insert would take a
// NEON pipe.
inline int8x8_t load_quad(const int8_t* p) {
  int8x8_t v;
  __asm__("ldr %s[v], %[p]" : [v] "=w"(v) : [p] "m"(*reinterpret_cast<const int8_t(*)[4]>(p)));
  return v;
}

// acc[r] += row r of A (a + r * a_stride, kp values) times a panel of kNeonDotLayout, C
// accumulators a row: 2 for the panel's 8 columns, 1 for its first 4 (the last panel of a
// layer whose columns end there: the other half of each quad is skipped). Sixteen values
// of a row a load, the last 4, 8 or 12 by loads of exactly those bytes.
template <int R, int C>
inline void multiply(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, int32x4_t (&acc)[R][C]) {
  // Quad `q` of K (lane q of av) against the panel's next 32 bytes.
#define EDGEINF_SDOT_QUAD(dot, q)                                             \
  {                                                                           \
    const int8x16_t b0 = vld1q_s8(b);                                         \
    const int8x16_t b1 = C == 2 ? vld1q_s8(b + 16) : b0;                      \
    b += 32;                                                                  \
    _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {                     \
      acc[r][0] = dot(acc[r][0], b0, av[r], q);                               \
      if constexpr (C == 2) acc[r][C - 1] = dot(acc[r][C - 1], b1, av[r], q); \
    }                                                                         \
  }
  size_t k0 = 0;
  for (; k0 + 16 <= kp; k0 += 16) {
    int8x16_t av[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) av[r] = vld1q_s8(a + r * a_stride + k0);
    EDGEINF_SDOT_QUAD(vdotq_laneq_s32, 0)
    EDGEINF_SDOT_QUAD(vdotq_laneq_s32, 1)
    EDGEINF_SDOT_QUAD(vdotq_laneq_s32, 2)
    EDGEINF_SDOT_QUAD(vdotq_laneq_s32, 3)
  }
  if (kp - k0 >= 8) {
    int8x8_t av[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) av[r] = vld1_s8(a + r * a_stride + k0);
    EDGEINF_SDOT_QUAD(vdotq_lane_s32, 0)
    EDGEINF_SDOT_QUAD(vdotq_lane_s32, 1)
    k0 += 8;
  }
  if (kp - k0 == 4) {
    int8x8_t av[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) av[r] = load_quad(a + r * a_stride + k0);
    EDGEINF_SDOT_QUAD(vdotq_lane_s32, 0)
  }
#undef EDGEINF_SDOT_QUAD
}

// Byte lanes 4i .. 4i + n - 1 of v (n <= 4) stored at o.
template <int I>
inline void store_quad(int8x16_t v, size_t n, int8_t* o) {
  if (n == 4) {
    vst1q_lane_s32(reinterpret_cast<int32_t*>(o), vreinterpretq_s32_s8(v), I);
    return;
  }
  if (n & 2) {
    vst1q_lane_s16(reinterpret_cast<int16_t*>(o), vreinterpretq_s16_s8(v), 2 * I);
    if (n & 1) vst1q_lane_s8(o + 2, v, 4 * I + 2);
  } else {
    vst1q_lane_s8(o, v, 4 * I);
  }
}

// The tile's rows requantized two at a time into 16 lanes (8 columns each), the last of an
// odd count alone; every row converted before the first store (an int8 store may alias
// the epilogue's parameters, which the compiler would then load again).
template <Epilogue::Mode M, int R>
inline void store_pairs(const int32x4_t (&acc)[R][2], const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
  int8x16_t pair[R / 2];
#pragma GCC unroll 8
  for (int r = 0; r + 1 < R; r += 2) {
    pair[r / 2] = neon::narrow_clamp16(e.lanes<M>(acc[r][0], 0), e.lanes<M>(acc[r][1], 1), e.lanes<M>(acc[r + 1][0], 0),
                                       e.lanes<M>(acc[r + 1][1], 1), e.lo16(), e.hi16());
  }
  int8x8_t last = {};
  if constexpr (R % 2 == 1) {
    last = neon::narrow_clamp(e.lanes<M>(acc[R - 1][0], 0), e.lanes<M>(acc[R - 1][1], 1), vget_low_s8(e.lo16()),
                              vget_low_s8(e.hi16()));
  }
#pragma GCC unroll 8
  for (int r = 0; r + 1 < R; r += 2) {
    int8_t* o = out + r * out_stride;
    if (ncols == neon::kNr) {
      // The second row's half by a lane store: vget_high_s8 would cost a NEON move.
      vst1_s8(o, vget_low_s8(pair[r / 2]));
      vst1q_lane_s64(reinterpret_cast<int64_t*>(o + out_stride), vreinterpretq_s64_s8(pair[r / 2]), 1);
    } else {
      neon::store_first(vget_low_s8(pair[r / 2]), ncols, o);
      neon::store_first(vget_high_s8(pair[r / 2]), ncols, o + out_stride);
    }
  }
  if constexpr (R % 2 == 1) {
    int8_t* o = out + (R - 1) * out_stride;
    if (ncols == neon::kNr) {
      vst1_s8(o, last);
    } else {
      neon::store_first(last, ncols, o);
    }
  }
}

// The rows of a 4-column tile requantized four at a time into 16 lanes (a group of fewer
// repeats its last row, computed and not stored).
template <Epilogue::Mode M, int R>
inline void store_quads(const int32x4_t (&acc)[R][1], const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
  constexpr int kGroups = (R + 3) / 4;
  int8x16_t group[kGroups];
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) {
    const int r = 4 * g;
    group[g] = neon::narrow_clamp16(e.lanes<M>(acc[r][0], 0), e.lanes<M>(acc[std::min(r + 1, R - 1)][0], 0),
                                    e.lanes<M>(acc[std::min(r + 2, R - 1)][0], 0),
                                    e.lanes<M>(acc[std::min(r + 3, R - 1)][0], 0), e.lo16(), e.hi16());
  }
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) {
    int8_t* o = out + 4 * g * out_stride;
    store_quad<0>(group[g], ncols, o);
    if (4 * g + 1 < R) store_quad<1>(group[g], ncols, o + out_stride);
    if (4 * g + 2 < R) store_quad<2>(group[g], ncols, o + 2 * out_stride);
    if (4 * g + 3 < R) store_quad<3>(group[g], ncols, o + 3 * out_stride);
  }
}

template <Epilogue::Mode M, int R>
inline void store(const int32x4_t (&acc)[R][2], const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
  store_pairs<M, R>(acc, e, ncols, out, out_stride);
}
template <Epilogue::Mode M, int R>
inline void store(const int32x4_t (&acc)[R][1], const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
  store_quads<M, R>(acc, e, ncols, out, out_stride);
}

// One tile of R rows by C groups of 4 columns.
template <int R, int C>
__attribute__((always_inline)) inline void dot_tile(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b,
                                                    const int32_t* start, const Epilogue& e, size_t ncols, int8_t* out,
                                                    size_t out_stride) {
  int32x4_t acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    // Each row's start values loaded anew (the empty asm hides that the address repeats):
    // copies of one load would be register moves, which take the SDOTs' NEON pipes.
    const int32_t* s = start;
    __asm__ volatile("" : "+r"(s));
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) acc[r][c] = vld1q_s32(s + 4 * c);
  }
  multiply<R, C>(kp, a, a_stride, b, acc);
  switch (e.mode()) {
    case Epilogue::kFloat:
      return store<Epilogue::kFloat, R>(acc, e, ncols, out, out_stride);
    case Epilogue::kFloatSplit:
      return store<Epilogue::kFloatSplit, R>(acc, e, ncols, out, out_stride);
    case Epilogue::kDouble:
      return store<Epilogue::kDouble, R>(acc, e, ncols, out, out_stride);
    default:
      if (e.shifts_right_only()) return store<Epilogue::kFixedRight, R>(acc, e, ncols, out, out_stride);
      return store<Epilogue::kFixed, R>(acc, e, ncols, out, out_stride);
  }
}

struct DotKernel {
  static constexpr PackLayout kLayout = kNeonDotLayout;

  // neon::gemm's tile of R rows, by SDOT by lane: quads of K, four columns an accumulator.
  template <int R>
  static void run_tile(size_t kp, const int8_t* a, size_t a_stride, const int8_t* b, bool /*negatable*/,
                       const int32_t* start, const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
    if (ncols <= 4) {
      dot_tile<R, 1>(kp, a, a_stride, b, start, e, ncols, out, out_stride);
    } else {
      dot_tile<R, 2>(kp, a, a_stride, b, start, e, ncols, out, out_stride);
    }
  }

  // neon::gemm's panel: its full tiles of kMr rows in one loop (no call a tile), then the
  // rows left over.
  static void run_panel(size_t kp, const int8_t* a, size_t a_stride, size_t rows, const int8_t* b, bool negatable,
                        const int32_t* start, const Epilogue& e, size_t ncols, int8_t* out, size_t out_stride) {
    constexpr size_t kMr = kLayout.mr;
    size_t r0 = 0;
    if (ncols > 4) {
      for (; r0 + kMr <= rows; r0 += kMr) {
        dot_tile<kMr, 2>(kp, a + r0 * a_stride, a_stride, b, start, e, ncols, out + r0 * out_stride, out_stride);
      }
    }
    neon::run_tiles<DotKernel>(kp, a, a_stride, r0, rows, b, negatable, start, e, ncols, out, out_stride);
  }

  // The whole row (kNeonDotRowLayout's panels, not `packed`); every panel done. Its K is
  // padded to 16: a row of fewer values is copied first.
  static size_t gemv_row(const GemmWeights& w, const FloatRequantization* fl, size_t kp, const int8_t* a,
                         const int8_t* /*packed*/, int8_t* out_row) {
    const size_t kp16 = round_up(w.k(), kNeonDotRowLayout.kpad);
    if (kp16 != kp) {
      int8_t* row = scratch<int8_t, 1>(kp16);
      std::memcpy(row, a, kp);
      std::memset(row + kp, 0, kp16 - kp);
      a = row;
    }
    if (w.shifts_right_only() && (!fl || fl->split)) {
      gemv_all<neon_rq::Form::kFixedRight>(w, nullptr, kp16, a, out_row);
    } else if (!fl) {
      gemv_all<neon_rq::Form::kFixedPoint>(w, nullptr, kp16, a, out_row);
    } else if (fl->split) {
      gemv_all<neon_rq::Form::kFloatSplit>(w, fl, kp16, a, out_row);
    } else {
      gemv_all<neon_rq::Form::kFloat>(w, fl, kp16, a, out_row);
    }
    return (w.n() + neon::kNr - 1) / neon::kNr;
  }
};

}  // namespace

void qs8_gemm__neondot(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  neon::gemm<DotKernel>(w, a, out, out_stride);
}

}  // namespace edgeinf::qs8
