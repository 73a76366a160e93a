// AVX2 GEMM: 6x16 tiles of int32 accumulators fed by VPMADDWD.
//
// A rows are converted once per block to int16 (a - zero_point), or arrive converted
// (GemmRows16), and are read as broadcast pairs of K; packed weights hold pairs of K per
// column and are sign-extended in the loop. int16 * int16 products of pairs cannot overflow an int32 lane (|a - zp| <=
// 255, |w| <= 128), unlike VPMADDUBSW's saturating int16 pairs, so the result is exact.
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../quant/avx2_inl.h"
#include "../../quant/rq_avx2_inl.h"
#include "dot_gemm.h"
#include "gemm.h"

namespace edgeinf::qs8 {
namespace {

constexpr size_t kNr = kAvx2Layout.nr;
constexpr size_t kMr = kAvx2Layout.mr;

inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// dst[0, kp) = a - zero_point for the row's segments, zeros after K.
void convert_row(const int8_t* const* segs, size_t taps, size_t seg, int32_t zero_point, int16_t* dst, size_t kp) {
  const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(zero_point));
  int16_t* d = dst;
  for (size_t t = 0; t < taps; ++t) {
    const int8_t* s = segs[t];
    size_t i = 0;
    for (; i + 16 <= seg; i += 16) {
      const __m256i v = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_sub_epi16(v, zp));
    }
    for (; i < seg; ++i) d[i] = static_cast<int16_t>(s[i] - zero_point);
    d += seg;
  }
  for (int16_t* end = dst + kp; d < end; ++d) *d = 0;
}

// Requantizes 16 columns of int32 accumulators (from col0) and stores ncols of them.
// The fixed-point path keeps the block's parameters in registers and saturates to int16
// and int8 on the way (rq_avx2_inl.h); it is built once per column block.
class Epilogue {
 public:
  Epilogue(const GemmWeights& w, size_t col0, size_t ncols) : ncols_(ncols), in_double_(w.requantizes_in_double()) {
    using namespace avx2;
    const Requantization& rq = w.requantization();
    lo8_ = _mm_set1_epi8(static_cast<char>(rq.act_min)), hi8_ = _mm_set1_epi8(static_cast<char>(rq.act_max));
    const FloatRequantization* fl = w.float_requantization();
    if (fl && avx2_rq::rounds_to_nearest()) {
      in_float_ = true, in_double_ = false;
      split_ = fl->split;
      for (size_t h = 0; h < 2; ++h) {
        scale_[h] = _mm256_loadu_ps(fl->scale.data() + col0 + 8 * h);
        offset_[h] = _mm256_loadu_ps(fl->offset.data() + col0 + 8 * h);
        offset_neg_[h] = _mm256_loadu_ps(fl->offset_neg.data() + col0 + 8 * h);
      }
      return;
    }
    if (in_double_) {
      ds_ = w.double_scale() + col0;
      zp_ = _mm256_set1_epi32(rq.output_zero_point);
      lo_ = _mm256_set1_epi32(rq.act_min), hi_ = _mm256_set1_epi32(rq.act_max);
      return;
    }
    const __m256i one = _mm256_set1_epi32(1);
    for (size_t h = 0; h < 2; ++h) {
      m_[h] = load8_i32(rq.multiplier.data() + col0 + 8 * h);
      m_odd_[h] = _mm256_srli_epi64(m_[h], 32);
      l_[h] = load8_i32(rq.left_shift.data() + col0 + 8 * h);
      r_[h] = load8_i32(rq.right_shift.data() + col0 + 8 * h);
      half_[h] = _mm256_srli_epi32(_mm256_sllv_epi32(one, r_[h]), 1);
    }
    zp16_ = _mm256_set1_epi16(static_cast<int16_t>(rq.output_zero_point));
  }

  void store(__m256i v0, __m256i v1, int8_t* o) const {
    using namespace avx2;
    if (in_double_) {
      put(pack16(requantize_double(v0, ds_, zp_, lo_, hi_), requantize_double(v1, ds_ + 8, zp_, lo_, hi_)), o);
    } else {
      put(in_float_ ? in_float(v0, v1) : fixed(v0, v1), o);
    }
  }

  // Rows of acc ([rows][16] int32) to rows of out.
  void store_rows(const int32_t* acc, size_t rows, int8_t* out, size_t out_stride) const {
    using namespace avx2;
    if (in_double_) {
      for (size_t r = 0; r < rows; ++r)
        store(load8_i32(acc + 16 * r), load8_i32(acc + 16 * r + 8), out + r * out_stride);
    } else if (in_float_) {
      for (size_t r = 0; r < rows; ++r)
        put(in_float(load8_i32(acc + 16 * r), load8_i32(acc + 16 * r + 8)), out + r * out_stride);
    } else {
      for (size_t r = 0; r < rows; ++r)
        put(fixed(load8_i32(acc + 16 * r), load8_i32(acc + 16 * r + 8)), out + r * out_stride);
    }
  }

 private:
  // rq_params.h's float form: one VFMADD per 8 columns, the zero point in the offsets.
  __m128i in_float(__m256i v0, __m256i v1) const {
    __m256i y[2];
    for (size_t h = 0; h < 2; ++h) {
      const __m256 x = _mm256_cvtepi32_ps(h ? v1 : v0);
      const __m256 offset = split_ ? _mm256_blendv_ps(offset_[h], offset_neg_[h], x) : offset_[h];
      y[h] = _mm256_cvtps_epi32(_mm256_fmadd_ps(x, scale_[h], offset));
    }
    const __m256i v16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(y[0], y[1]), 0xD8);
    const __m128i bytes = _mm_packs_epi16(_mm256_castsi256_si128(v16), _mm256_extracti128_si256(v16, 1));
    return _mm_min_epi8(_mm_max_epi8(bytes, lo8_), hi8_);
  }

  __m128i fixed(__m256i v0, __m256i v1) const {
    const __m256i y0 = avx2_rq::mbqm8<true>(v0, m_[0], m_odd_[0], l_[0], r_[0], half_[0]);
    const __m256i y1 = avx2_rq::mbqm8<true>(v1, m_[1], m_odd_[1], l_[1], r_[1], half_[1]);
    // VPACKSSDW interleaves the halves' 128-bit lanes: columns 0-3, 8-11 | 4-7, 12-15.
    const __m256i v16 = _mm256_permute4x64_epi64(_mm256_adds_epi16(_mm256_packs_epi32(y0, y1), zp16_), 0xD8);
    const __m128i bytes = _mm_packs_epi16(_mm256_castsi256_si128(v16), _mm256_extracti128_si256(v16, 1));
    return _mm_min_epi8(_mm_max_epi8(bytes, lo8_), hi8_);
  }

  void put(__m128i bytes, int8_t* o) const { avx2::store_bytes(o, bytes, ncols_); }

  size_t ncols_;
  bool in_double_, in_float_ = false, split_ = false;
  __m256 scale_[2], offset_[2], offset_neg_[2];  // float form
  __m256i m_[2], m_odd_[2], l_[2], r_[2], half_[2], zp16_;
  __m128i lo8_, hi8_;
  __m256i zp_, lo_, hi_;  // double path
  const double* ds_ = nullptr;
};

// Accumulators are named variables (not an array) so that GCC keeps all twelve in
// registers; rows beyond R compile away.
#define EDGEINF_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// One slice of K for a tile, kpairs pairs from pair `off` of segment t0: row r's segment
// t starts at rows[r * taps + t] (int16 a - zero_point, seg_pairs pairs each; a slice may
// start or end inside a segment). The accumulators start from the bias (`first`) or from `acc`
// ([R][16] int32) and end in `acc`; the epilogue requantizes them from there, out of the
// loop's registers.
// Wide: the panel holds int16 pairs (plain loads); else int8 pairs sign-extended here.
// kOneSegment: rows of one segment each (dense rows), without the walk over segments.
template <int R, bool kWide, bool kOneSegment>
void tile(const int16_t* const* rows, size_t taps, size_t seg_pairs, size_t t0, size_t off, size_t kpairs,
          const int8_t* b, const int32_t* bias, int32_t* acc, bool first) {
  using namespace avx2;
  const __m256i bias0 = load8_i32(bias), bias1 = load8_i32(bias + 8);
#define EDGEINF_INIT(r)                                                        \
  __m256i c##r##0 = first ? bias0 : load8_i32(acc + 16 * (R > r ? r : 0));     \
  __m256i c##r##1 = first ? bias1 : load8_i32(acc + 16 * (R > r ? r : 0) + 8); \
  const int16_t* a##r = nullptr;                                               \
  (void)a##r;
  EDGEINF_ROWS(EDGEINF_INIT)
#undef EDGEINF_INIT
  size_t t = t0, left = kpairs;  // kpairs > 0
  do {
    const size_t count = kOneSegment ? left : std::min(seg_pairs - off, left);
    left -= count;
#define EDGEINF_ROW(r) \
  if constexpr (R > r) a##r = rows[r * (kOneSegment ? 1 : taps) + t] + 2 * off;
    EDGEINF_ROWS(EDGEINF_ROW)
#undef EDGEINF_ROW
#pragma GCC unroll 2
    for (size_t p = 0; p < count; ++p) {
      __m256i b0, b1;
      if constexpr (kWide) {
        b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
        b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
        b += 64;
      } else {
        b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
        b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
        b += 32;
      }
#define EDGEINF_STEP(r)                                             \
  if constexpr (R > r) {                                            \
    const __m256i av = _mm256_set1_epi32(load_i32(a##r + 2 * p));   \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(av, b0)); \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(av, b1)); \
  }
      EDGEINF_ROWS(EDGEINF_STEP)
#undef EDGEINF_STEP
    }
    ++t, off = 0;
  } while (!kOneSegment && left > 0);
#define EDGEINF_SAVE(r)                                                         \
  if constexpr (R > r) {                                                        \
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 16 * r), c##r##0);     \
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + 16 * r + 8), c##r##1); \
  }
  EDGEINF_ROWS(EDGEINF_SAVE)
#undef EDGEINF_SAVE
}
#undef EDGEINF_ROWS

// One row (batch-1 fully connected): each weight is used once, so the loop is about
// instructions per weight byte. VPMADDUBSW multiplies 32 bytes at a time, unsigned by
// signed, into saturating int16 pair sums; with u = |a| (0..128) and s = w negated where
// a < 0 (w in [-127, 127]) a pair sum is at most 2 * 128 * 127 < 32768, so it is exact.
// The raw activations go in (the zero point is in the bias term, as on NEON), and a
// K quad costs one load, VPSIGNB, VPMADDUBSW, VPMADDWD and VPADDD per 32 weights,
// against two sign-extending loads, two VPMADDWD and two VPADDD on int16 pairs. `Q`
// column blocks are interleaved to keep independent chains in flight. (Software
// prefetch measured slower here, from cache and from memory alike.)
template <size_t Q>
void gemv_blocks(size_t kquads, const int8_t* a, const int8_t* a_abs, const int8_t* panel, size_t panel_bytes,
                 const GemmWeights& w, size_t col0, size_t ncols_last, int8_t* out) {
  using namespace avx2;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c[Q][2];
  const int8_t* b[Q];
  for (size_t q = 0; q < Q; ++q) {
    c[q][0] = load8_i32(w.bias_minus_zero_point_terms() + col0 + q * kNr);
    c[q][1] = load8_i32(w.bias_minus_zero_point_terms() + col0 + q * kNr + 8);
    b[q] = panel + q * panel_bytes;
  }
#pragma GCC unroll 2
  for (size_t p = 0; p < kquads; ++p) {
    const __m256i sign = _mm256_set1_epi32(load_i32(a + 4 * p));
    const __m256i magnitude = _mm256_set1_epi32(load_i32(a_abs + 4 * p));
#pragma GCC unroll 4
    for (size_t q = 0; q < Q; ++q) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[q] + 64 * p));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[q] + 64 * p + 32));
      const __m256i p0 = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w0, sign));
      const __m256i p1 = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w1, sign));
      c[q][0] = _mm256_add_epi32(c[q][0], _mm256_madd_epi16(p0, ones));
      c[q][1] = _mm256_add_epi32(c[q][1], _mm256_madd_epi16(p1, ones));
    }
  }
  for (size_t q = 0; q < Q; ++q) {
    Epilogue(w, col0 + q * kNr, q + 1 == Q ? ncols_last : kNr).store(c[q][0], c[q][1], out + q * kNr);
  }
}

// Batch-1 fully connected over kAvx2GemvLayout panels (weights without -128).
void gemv(const GemmWeights& w, const GemmRows& a, int8_t* out) {
  constexpr size_t kGroup = 4;
  const size_t n = w.n(), kp = round_up(a.k(), 4), blocks = (n + kNr - 1) / kNr, panel_bytes = kp * kNr;
  const int8_t* packed = w.packed(kAvx2GemvLayout);
  int8_t* row = scratch<int8_t, 2>(2 * kp);
  int8_t* row_abs = row + kp;
  gather_rows(a, 0, 1, row, kp);
  for (size_t i = 0; i < kp; ++i) row_abs[i] = static_cast<int8_t>(std::abs(row[i]));  // |-128| wraps to 0x80 = 128u
  size_t j = 0;
  for (; j + kGroup <= blocks; j += kGroup) {
    const size_t last = std::min(kNr, n - (j + kGroup - 1) * kNr);
    gemv_blocks<kGroup>(kp / 4, row, row_abs, packed + j * panel_bytes, panel_bytes, w, j * kNr, last, out + j * kNr);
  }
  for (; j < blocks; ++j) {
    gemv_blocks<1>(kp / 4, row, row_abs, packed + j * panel_bytes, panel_bytes, w, j * kNr, std::min(kNr, n - j * kNr),
                   out + j * kNr);
  }
}

using TileFn = void (*)(const int16_t* const*, size_t, size_t, size_t, size_t, size_t, const int8_t*, const int32_t*,
                        int32_t*, bool);
// Tiles by height for each panel width and row form.
template <bool kWide, bool kOneSegment>
constexpr TileFn kTileSet[kMr + 1] = {nullptr,
                                      &tile<1, kWide, kOneSegment>,
                                      &tile<2, kWide, kOneSegment>,
                                      &tile<3, kWide, kOneSegment>,
                                      &tile<4, kWide, kOneSegment>,
                                      &tile<5, kWide, kOneSegment>,
                                      &tile<6, kWide, kOneSegment>};
// Below this many rows the weights are streamed once or twice: int8 panels halve the
// memory traffic; above it, int16 panels save the sign extension in the loop.
constexpr size_t kWideMinRows = 4 * kMr;
// Pairs of K per slice: 16 columns x 512 values of int16 weights (16 KB) plus a 6-row
// A tile (6 KB) fit in a 32 KB L1 data cache.
constexpr size_t kSlicePairs = 256;

// Rows per block: a block's int16 rows stay within about 192 KB (L2). Blocks of equal
// height: a thin last block would stream all the weights for a few rows.
size_t block_rows(size_t m, size_t kp) {
  if (m == 0) return kMr;  // no rows, no blocks (and no division by their count)
  const size_t fit = std::max<size_t>(kMr, (192 * 1024 / (kp * sizeof(int16_t))) / kMr * kMr);
  const size_t mblocks = (m + fit - 1) / fit;
  return round_up((m + mblocks - 1) / mblocks, kMr);
}

// The tiled GEMM over m rows of K = taps * seg_pairs pairs, given as int16 segments:
// rows_of(m0, rows) returns the segment pointers of rows [m0, m0 + rows) (rows * taps of
// them, row-major), making the rows ready first if needed.
template <class RowsOf>
void gemm_tiles(const GemmWeights& w, size_t m, size_t taps, size_t seg_pairs, RowsOf rows_of, int8_t* out,
                size_t out_stride) {
  const size_t n = w.n(), kpairs = taps * seg_pairs, kp = 2 * kpairs;
  const bool wide = m >= kWideMinRows;
  const int8_t* packed = w.packed(wide ? kAvx2WideLayout : kAvx2Layout);
  const TileFn* tiles = taps == 1 ? (wide ? kTileSet<true, true> : kTileSet<false, true>)
                                  : (wide ? kTileSet<true, false> : kTileSet<false, false>);
  const size_t panel_bytes = kp * kNr * (wide ? 2 : 1);
  const size_t blocks = (n + kNr - 1) / kNr;
  const size_t mc = block_rows(m, kp);
  // Slices of K keep a weight slice and an A tile in L1 together; the accumulators of
  // every tile of a column block wait in int32 between slices. Few rows stream the
  // weights once: no slicing. Slices are of equal length: a short last one would save
  // and reload the accumulators for little work.
  const size_t kslices = wide ? (kpairs + kSlicePairs - 1) / kSlicePairs : 1;
  const size_t slice = (kpairs + kslices - 1) / kslices;
  int32_t* partial = scratch<int32_t, 1>(mc * kNr);
  for (size_t m0 = 0; m0 < m; m0 += mc) {
    const size_t rows = std::min(mc, m - m0);
    const int16_t* const* segs = rows_of(m0, rows);
    for (size_t j = 0; j < blocks; ++j) {
      const int8_t* panel = packed + j * panel_bytes;
      const size_t ncols = std::min(kNr, n - j * kNr);
      for (size_t k0 = 0; k0 < kpairs; k0 += slice) {
        const size_t count = std::min(slice, kpairs - k0);
        const int8_t* slice_b = panel + k0 * 2 * kNr * (wide ? 2 : 1);
        const size_t t0 = k0 / seg_pairs, off = k0 % seg_pairs;  // where the slice starts
        for (size_t r0 = 0; r0 < rows; r0 += kMr) {
          tiles[std::min(kMr, rows - r0)](segs + r0 * taps, taps, seg_pairs, t0, off, count, slice_b,
                                          w.bias() + j * kNr, partial + r0 * kNr, k0 == 0);
        }
      }
      Epilogue(w, j * kNr, ncols).store_rows(partial, rows, out + m0 * out_stride + j * kNr, out_stride);
    }
  }
}

}  // namespace

void qs8_gemm__avx2(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  if (a.m == 0) return;
  if (a.m == 1 && w.weights_negatable()) return gemv(w, a, out);
  // Each block of rows is converted once to int16 (a - zero_point), K padded to pairs.
  const size_t kp = round_up(a.k(), 2);
  const size_t mc = block_rows(a.m, kp);
  int16_t* abuf = scratch<int16_t, 0>(mc * kp);
  const int16_t** row_ptrs = scratch<const int16_t*, 3>(mc);
  auto convert_block = [&](size_t m0, size_t rows) -> const int16_t* const* {
    for (size_t r = 0; r < rows; ++r) {
      convert_row(a.ptrs + (m0 + r) * a.taps, a.taps, a.seg, w.input_zero_point(), abuf + r * kp, kp);
      row_ptrs[r] = abuf + r * kp;
    }
    return row_ptrs;
  };
  gemm_tiles(w, a.m, 1, kp / 2, convert_block, out, out_stride);
}

void qs8_gemm_requantize_rows__avx2(const GemmWeights& w, size_t col0, size_t ncols, const int32_t* acc, size_t rows,
                                    int8_t* out, size_t out_stride) {
  Epilogue(w, col0, ncols).store_rows(acc, rows, out, out_stride);
}

void qs8_gemm16__avx2(const GemmWeights& w, const GemmRows16& a, int8_t* out, size_t out_stride) {
  if (a.m == 0) return;
  gemm_tiles(
      w, a.m, a.taps, a.seg / 2, [&](size_t m0, size_t) { return a.ptrs + m0 * a.taps; }, out, out_stride);
}

}  // namespace edgeinf::qs8
