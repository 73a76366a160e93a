// conv2d on the VPDPBUSD indirect tiles (dot_gemm.h's qs8_conv2d_indirect_dot): the
// driver, with no instruction beyond AVX2; the ISA files supply the tiles.
//
// The input is copied once to uint8 (a + 128, as the VPDPBUSD paths read activations)
// with its padding around it as zero points, so every filter tap of every output pixel
// lies inside the copy: a tile reads each tap's input channels where they lie (its
// pixel's window origin plus the tap's offset), where the GEMM route copies every window
// (nine times the input for a 3x3 filter) before multiplying, and no tap needs a bounds
// check. OHWI weights flattened are tap-major with each tap's channels contiguous, so
// with input channels a multiple of 4 the GEMM's kDotLayout panels serve unchanged, and
// so do its accumulator start (bias - (zero_point + 128) * sum(w)) and epilogue: a padded
// tap reads zero points, which adds nothing, as the reference's skipped tap.
//
// Taps in the padding are left out, with their share of the accumulator start
// (ConvWeights::tap_weight_sums()): the output pixels are cut into blocks whose windows
// share the taps inside the image (the inner pixels, the left and right edges, the rows
// at the top and bottom), each block into tiles in raster order; a tile stores its pixels
// wherever they lie.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "../../quant/rq_avx2_inl.h"
#include "../qs8_gemm/dot_gemm.h"
#include "../qs8_gemm/gemm.h"
#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

constexpr size_t kNr = kDotLayout.nr;

// dst[i] = src[i] + 128 as uint8 (the sign bit flipped), i < count.
void to_u8(const int8_t* src, size_t count, uint8_t* dst) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_xor_si256(v, flip));
  }
  for (; i < count; ++i) dst[i] = static_cast<uint8_t>(src[i]) ^ 0x80u;
}

// The filter taps [k0, k1) whose input rows (or columns) lie inside the image for output
// row (or column) o: origin o * stride - pad, taps `dilation` apart.
void inside_taps(size_t o, size_t stride, ptrdiff_t pad, size_t dilation, size_t filter, size_t in, size_t* k0,
                 size_t* k1) {
  const ptrdiff_t origin = static_cast<ptrdiff_t>(o * stride) - pad, d = static_cast<ptrdiff_t>(dilation);
  const ptrdiff_t lo = origin >= 0 ? 0 : (-origin + d - 1) / d;
  const ptrdiff_t last = static_cast<ptrdiff_t>(in) - 1 - origin;  // the last tap inside is at most last / d
  const ptrdiff_t hi = last < 0 ? 0 : std::min<ptrdiff_t>(static_cast<ptrdiff_t>(filter), last / d + 1);
  *k0 = static_cast<size_t>(std::min(lo, hi));
  *k1 = static_cast<size_t>(hi);
}

// The taps of rectangle [ky0, ky1) x [kx0, kx1) and the accumulator start that leaves the
// others out: start[c] + (zero_point + 128) * (their weight sums), wrapping as int32.
struct TapRect {
  size_t ky0, ky1, kx0, kx1;
  const DotTap* taps;
  size_t count;
  const int32_t* start;
};

}  // namespace

PaddedInput::PaddedInput(const ConvGeometry& g)
    : pad_top(static_cast<size_t>(g.pad_top)), pad_left(static_cast<size_t>(g.pad_left)) {
  padded_h = std::max(pad_top + g.in_h, (g.out_h - 1) * g.stride_h + (g.k_h - 1) * g.dilation_h + 1);
  padded_w = std::max(pad_left + g.in_w, (g.out_w - 1) * g.stride_w + (g.k_w - 1) * g.dilation_w + 1);
}

void copy_padded(const ConvGeometry& g, const PaddedInput& p, const int8_t* in, uint8_t padding, uint8_t* dst) {
  const size_t c = g.in_c, row = p.padded_w * c, left = p.pad_left * c, inner = g.in_w * c;
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t y = 0; y < p.padded_h; ++y, dst += row) {
      const size_t iy = y - p.pad_top;  // wraps above the image
      if (y < p.pad_top || iy >= g.in_h) {
        std::memset(dst, padding, row);
        continue;
      }
      std::memset(dst, padding, left);
      to_u8(in + (b * g.in_h + iy) * inner, inner, dst + left);
      std::memset(dst + left + inner, padding, row - left - inner);
    }
  }
}

void qs8_conv2d_indirect_dot(const DotIndirectTiles& wide, const DotIndirectTiles& narrow, const ConvWeights& cw,
                             const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const GemmWeights& w = cw.gemm();
  const size_t taps = g.k_h * g.k_w, c = g.in_c;
  if (taps == 1 || c % 4 != 0 || g.pad_top < 0 || g.pad_left < 0) return qs8_conv2d__gemm(w, g, in, out);
  const size_t pixels = g.batch * g.out_h * g.out_w;
  if (pixels == 0) return;
  const size_t n = w.n(), k = w.k(), padded_n = round_up(n, kNr);
  const DotIndirectTiles& tiles = n <= kNr ? narrow : wide;
  const size_t mr = tiles.mr, nc = tiles.nc;

  const PaddedInput p(g);
  uint8_t* a = scratch<uint8_t, 6>(p.values(g.batch, g.in_c));
  copy_padded(g, p, in, static_cast<uint8_t>(w.input_zero_point() + 128), a);

  const int8_t* packed = w.packed(kDotLayout);
  const size_t panel_bytes = k * kNr, blocks = (n + kNr - 1) / kNr, groups = (blocks + nc - 1) / nc;
  const FloatRequantization* fl = w.float_requantization();
  // The tiles requantize where they can (as in the GEMM); else the AVX2 epilogue runs on
  // their accumulators.
  const bool float_form = fl != nullptr && avx2_rq::rounds_to_nearest();
  const bool fused = tiles.requantizes && (float_form || !w.requantizes_in_double());
  DotOutput* outputs = scratch<DotOutput, 0>(groups);
  for (size_t j = 0; j < groups; ++j) {
    const size_t col0 = j * nc * kNr;
    outputs[j] = fused_output(w, float_form, col0, std::min(nc * kNr, n - col0), n);
  }
  int32_t* partial = scratch<int32_t, 7>(nc * mr * kNr);
  const size_t acc_stride = mr * kNr;

  // Tap rectangles met so far (the first: every tap), up to kMaxRects; a tile whose
  // rectangle finds no room takes every tap (reading zero points).
  constexpr size_t kMaxRects = 16;
  TapRect rects[kMaxRects];
  size_t rect_count = 0;
  DotTap* tap_store = scratch<DotTap, 0>(kMaxRects * taps);
  int32_t* start_store = scratch<int32_t, 8>(kMaxRects * padded_n);
  const uint32_t zero_point_u8 = static_cast<uint32_t>(w.input_zero_point() + 128);
  auto rect_of = [&](size_t ky0, size_t ky1, size_t kx0, size_t kx1) -> const TapRect& {
    for (size_t i = 0; i < rect_count; ++i) {
      const TapRect& r = rects[i];
      if (r.ky0 == ky0 && r.ky1 == ky1 && r.kx0 == kx0 && r.kx1 == kx1) return r;
    }
    if (rect_count == kMaxRects) return rects[0];
    DotTap* t = tap_store + rect_count * taps;
    const bool every_tap = ky0 == 0 && ky1 == g.k_h && kx0 == 0 && kx1 == g.k_w;
    int32_t* st = start_store + rect_count * padded_n;
    if (!every_tap) std::copy(w.bias_minus_u8_zero_point_terms(), w.bias_minus_u8_zero_point_terms() + padded_n, st);
    size_t count = 0;
    for (size_t ky = 0; ky < g.k_h; ++ky) {
      for (size_t kx = 0; kx < g.k_w; ++kx) {
        const size_t tap = ky * g.k_w + kx;
        if (ky >= ky0 && ky < ky1 && kx >= kx0 && kx < kx1) {
          t[count++] =
              DotTap{static_cast<ptrdiff_t>((ky * g.dilation_h * p.padded_w + kx * g.dilation_w) * c), tap * c * kNr};
          continue;
        }
        const int32_t* sums = cw.tap_weight_sums() + tap * padded_n;
        for (size_t col = 0; col < padded_n; ++col) {
          st[col] =
              static_cast<int32_t>(static_cast<uint32_t>(st[col]) + zero_point_u8 * static_cast<uint32_t>(sums[col]));
        }
      }
    }
    rects[rect_count] = TapRect{ky0, ky1, kx0, kx1, t, count, every_tap ? w.bias_minus_u8_zero_point_terms() : st};
    return rects[rect_count++];
  };
  rect_of(0, g.k_h, 0, g.k_w);

  // The taps inside the image per output row and column.
  size_t* rows_in = scratch<size_t, 0>(2 * (g.out_h + g.out_w));
  size_t* cols_in = rows_in + 2 * g.out_h;
  for (size_t oy = 0; oy < g.out_h; ++oy) {
    inside_taps(oy, g.stride_h, g.pad_top, g.dilation_h, g.k_h, g.in_h, &rows_in[2 * oy], &rows_in[2 * oy + 1]);
  }
  for (size_t ox = 0; ox < g.out_w; ++ox) {
    inside_taps(ox, g.stride_w, g.pad_left, g.dilation_w, g.k_w, g.in_w, &cols_in[2 * ox], &cols_in[2 * ox + 1]);
  }
  // Runs of output rows (and of columns) with the same taps inside the image: bounds[0] = 0
  // < ... < bounds[runs] = count.
  auto runs = [](const size_t* in_taps, size_t count, size_t* bounds) {
    size_t m = 0;
    bounds[0] = 0;
    for (size_t i = 1; i < count; ++i) {
      if (in_taps[2 * i] != in_taps[2 * i - 2] || in_taps[2 * i + 1] != in_taps[2 * i - 1]) bounds[++m] = i;
    }
    bounds[++m] = count;
    return m;
  };
  size_t* row_bounds = scratch<size_t, 1>(g.out_h + g.out_w + 2);
  size_t* col_bounds = row_bounds + g.out_h + 1;
  const size_t row_runs = runs(rows_in, g.out_h, row_bounds), col_runs = runs(cols_in, g.out_w, col_bounds);

  const size_t image = p.padded_h * p.padded_w * c;
  const uint8_t* origins[kDotMaxRows];
  int8_t* pixel_out[kDotMaxRows];
  int8_t* out_rows[kDotMaxRows];
  // One tile of `count` pixels (origins, pixel_out) with the taps of `rect`.
  auto tile = [&](size_t count, const TapRect& rect) {
    for (size_t j = 0; j < groups; ++j) {
      const size_t col0 = j * nc * kNr, panels = std::min(nc, blocks - j * nc);
      for (size_t r = 0; r < count; ++r) out_rows[r] = pixel_out[r] + col0;
      tiles.panels[panels].tile[count](origins, rect.taps, rect.count, c / 4, packed + col0 * k, panel_bytes,
                                       rect.start + col0, partial, acc_stride, fused ? &outputs[j] : nullptr, out_rows);
      if (fused) continue;
      for (size_t r0 = 0, r1; r0 < count; r0 = r1) {  // runs of evenly spaced rows
        for (r1 = r0 + 1; r1 < count && out_rows[r1] == out_rows[r1 - 1] + n;) ++r1;
        for (size_t q = 0; q < panels; ++q) {
          const size_t c0 = col0 + q * kNr;
          qs8_gemm_requantize_rows__avx2(w, c0, std::min(kNr, n - c0), partial + q * acc_stride + r0 * kNr, r1 - r0,
                                         out_rows[r0] + q * kNr, n);
        }
      }
    }
  };
  // The pixels of rows [y0, y1) and columns [x0, x1) of image b in raster order, in tiles
  // of balanced sizes up to mr, with the taps of `rect`.
  auto block = [&](size_t b, size_t y0, size_t y1, size_t x0, size_t x1, const TapRect& rect) {
    const size_t len = (y1 - y0) * (x1 - x0), count = (len + mr - 1) / mr, base = len / count, extra = len % count;
    size_t oy = y0, ox = x0;
    for (size_t t = 0; t < count; ++t) {
      const size_t rows = base + (t < extra ? 1 : 0);
      for (size_t r = 0; r < rows; ++r) {
        origins[r] = a + b * image + (oy * g.stride_h * p.padded_w + ox * g.stride_w) * c;
        pixel_out[r] = out + ((b * g.out_h + oy) * g.out_w + ox) * n;
        if (++ox == x1) ox = x0, ++oy;
      }
      tile(rows, rect);
    }
  };
  auto rect_or_none = [&](size_t ky0, size_t ky1, size_t kx0, size_t kx1) -> const TapRect& {
    return ky0 < ky1 && kx0 < kx1 ? rect_of(ky0, ky1, kx0, kx1) : rect_of(0, 0, 0, 0);
  };
  size_t kx_min = g.k_w, kx_max = 0;  // the taps inside for some column
  for (size_t ox = 0; ox < g.out_w; ++ox)
    kx_min = std::min(kx_min, cols_in[2 * ox]), kx_max = std::max(kx_max, cols_in[2 * ox + 1]);
  // The rows whose windows have every filter row inside the image, cut into blocks of
  // columns with the same taps inside (the inner pixels, the left and right edges); each
  // other run of rows whole, with the taps inside for some of its columns (its corner
  // pixels read a few zero points instead of making tiles of their own).
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t yr = 0; yr < row_runs; ++yr) {
      const size_t y0 = row_bounds[yr], y1 = row_bounds[yr + 1], ky0 = rows_in[2 * y0], ky1 = rows_in[2 * y0 + 1];
      if (ky0 != 0 || ky1 != g.k_h) {
        block(b, y0, y1, 0, g.out_w, rect_or_none(ky0, ky1, kx_min, kx_max));
        continue;
      }
      for (size_t xr = 0; xr < col_runs; ++xr) {
        const size_t x0 = col_bounds[xr], x1 = col_bounds[xr + 1];
        block(b, y0, y1, x0, x1, rect_or_none(ky0, ky1, cols_in[2 * x0], cols_in[2 * x0 + 1]));
      }
    }
  }
}

}  // namespace edgeinf::qs8
