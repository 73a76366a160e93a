// The driver of the VPDPBUSD GEMM (dot_gemm.h): blocks of rows gathered once into uint8
// (a + 128), tiles of up to mr rows by 16 columns from the ISA's micro-kernel, and the
// AVX2 epilogue. The driver has no instruction beyond AVX2; the micro-kernel carries the
// ISA's.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "../../quant/rq_avx2_inl.h"
#include "../qs8_conv2d/conv2d.h"
#include "dot_gemm.h"
#include "gemm.h"

namespace edgeinf::qs8 {
namespace {

constexpr size_t kNr = kDotLayout.nr;

// Rows per block: a block's uint8 rows stay within about 96 KB (L2), and a block
// is a multiple of mr rows; blocks of equal height, as in the AVX2 GEMM.
size_t block_rows(size_t m, size_t kp, size_t mr) {
  const size_t fit = std::max(mr, (96 * 1024 / kp) / mr * mr);
  const size_t mblocks = (m + fit - 1) / fit;
  return round_up((m + mblocks - 1) / mblocks, mr);
}

}  // namespace

void gather_rows_u8(const GemmRows& a, size_t m0, size_t rows, uint8_t* dst, size_t kp, size_t stride) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const size_t taps = a.taps, seg = a.seg;  // locals: the byte stores may alias `a`
  // Rows that lie back to back without padding (a pointwise convolution's pixels, as the
  // caller says): one pass over the whole block.
  if (taps == 1 && seg == kp && stride == kp && a.stride == seg) {
    const int8_t* s = a.ptrs[m0];
    const size_t bytes = rows * seg;
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_xor_si256(v, flip));
    }
    for (; i < bytes; ++i) dst[i] = static_cast<uint8_t>(s[i]) ^ 0x80u;
    return;
  }
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* d = dst + r * stride;
    const int8_t* const* segs = a.ptrs + (m0 + r) * taps;
    for (size_t t = 0; t < taps; ++t, d += seg) {
      const int8_t* s = segs[t];
      size_t i = 0;
      for (; i + 32 <= seg; i += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_xor_si256(v, flip));
      }
      if (i + 16 <= seg) {  // short segments (a few channels) in 16- and 8-byte pieces
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_xor_si128(v, _mm256_castsi256_si128(flip)));
        i += 16;
      }
      if (i + 8 <= seg) {
        uint64_t v;
        std::memcpy(&v, s + i, sizeof(v));
        v ^= 0x8080808080808080u;
        std::memcpy(d + i, &v, sizeof(v));
        i += 8;
      }
      for (; i < seg; ++i) d[i] = static_cast<uint8_t>(s[i]) ^ 0x80u;
    }
    std::fill(d, dst + r * stride + kp, uint8_t{0});
  }
}

DotOutput fused_output(const GemmWeights& w, bool float_form, size_t col0, size_t ncols, size_t out_stride) {
  const FloatRequantization* fl = w.float_requantization();
  const FloatRequantization* guarded = float_form ? nullptr : w.guarded_float_requantization();
  const Requantization& rq = w.requantization();
  DotOutput o{};
  o.split = float_form && fl->split;
  if (float_form) {
    o.scale = fl->scale.data() + col0, o.offset = fl->offset.data() + col0;
    o.offset_neg = fl->offset_neg.data() + col0;
  } else if (guarded != nullptr) {
    o.scale = guarded->scale.data() + col0, o.offset = guarded->offset.data() + col0;
    o.offset_neg = guarded->offset_neg.data() + col0;
  }
  o.multiplier = rq.multiplier.data() + col0, o.left_shift = rq.left_shift.data() + col0;
  o.right_shift = rq.right_shift.data() + col0, o.zero_point = rq.output_zero_point;
  o.act_min = rq.act_min, o.act_max = rq.act_max;
  o.out_stride = out_stride, o.ncols = ncols;
  return o;
}

namespace {

// The tiles and their epilogue over a block of `rows` uint8 rows (kp apart, K padded with
// anything: the weights there are zero) into rows of out; partial holds nc * acc_stride
// int32 (acc_stride >= rows * 16).
void multiply_block(const DotTiles& tiles, const GemmWeights& w, const uint8_t* abuf, size_t rows, size_t kp,
                    int8_t* out, size_t out_stride, int32_t* partial, size_t acc_stride) {
  const size_t n = w.n(), mr = tiles.mr, nc = tiles.nc;
  const int8_t* packed = w.packed(kDotLayout);
  const size_t panel_bytes = kp * kNr, blocks = (n + kNr - 1) / kNr;
  const int32_t* start = w.bias_minus_u8_zero_point_terms();
  const FloatRequantization* fl = w.float_requantization();
  // The tiles requantize where they can: the float form (rounding to nearest) or the
  // fixed-point arithmetic; the double one of FULLY_CONNECTED runs the AVX2 epilogue on
  // their accumulators.
  const bool float_form = fl != nullptr && avx2_rq::rounds_to_nearest();
  const bool fused = tiles.requantizes && (float_form || !w.requantizes_in_double());
  for (size_t j = 0; j < blocks; j += nc) {
    const size_t panels = std::min(nc, blocks - j);
    const DotTileRow& by_rows = tiles.panels[panels];
    const int8_t* panel = packed + j * panel_bytes;
    const size_t col0 = j * kNr;
    DotOutput o = fused ? fused_output(w, float_form, col0, std::min(panels * kNr, n - col0), out_stride) : DotOutput{};
    for (size_t r0 = 0; r0 < rows; r0 += mr) {
      o.out = out + r0 * out_stride + col0;
      by_rows.tile[std::min(mr, rows - r0)](abuf + r0 * kp, kp, kp / 4, panel, panel_bytes, start + col0,
                                            partial + r0 * kNr, acc_stride, fused ? &o : nullptr);
    }
    if (fused) continue;
    for (size_t c = 0; c < panels; ++c) {
      const size_t c0 = col0 + c * kNr;
      qs8_gemm_requantize_rows__avx2(w, c0, std::min(kNr, n - c0), partial + c * acc_stride, rows, out + c0,
                                     out_stride);
    }
  }
}

}  // namespace

void qs8_gemm_dot(const DotTiles& tiles, const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  if (a.m == 0) return;
  const size_t kp = round_up(a.k(), kDotLayout.kpad);
  const size_t mc = block_rows(a.m, kp, tiles.mr);
  uint8_t* abuf = scratch<uint8_t, 0>(mc * kp);
  // The accumulators of nc panels: [panel][row][16].
  int32_t* partial = scratch<int32_t, 2>(tiles.nc * mc * kNr);
  for (size_t m0 = 0; m0 < a.m; m0 += mc) {
    const size_t rows = std::min(mc, a.m - m0);
    gather_rows_u8(a, m0, rows, abuf, kp, kp);
    multiply_block(tiles, w, abuf, rows, kp, out + m0 * out_stride, out_stride, partial, mc * kNr);
  }
}

void qs8_conv2d_dot(const DotTiles& tiles, const ConvWeights& cw, const ConvGeometry& g, const int8_t* in,
                    int8_t* out) {
  const GemmWeights& w = cw.gemm();
  const size_t pixels = g.batch * g.out_h * g.out_w;
  if (pixels == 0) return;
  const size_t kp = round_up(w.k(), kDotLayout.kpad), mc = block_rows(pixels, kp, tiles.mr);
  // Windows as uint8 rows, 16 bytes of slack for the wide copies.
  uint8_t* windows = scratch<uint8_t, 4>(mc * kp + 16);
  int8_t* one = scratch<int8_t, 5>(kp + 16);
  int32_t* partial = scratch<int32_t, 2>(tiles.nc * mc * kNr);
  const int8_t zero_point = static_cast<int8_t>(w.input_zero_point());
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  const size_t c = g.in_c, run = g.k_w * c;
  const ptrdiff_t in_h = static_cast<ptrdiff_t>(g.in_h), in_w = static_cast<ptrdiff_t>(g.in_w);
  const int8_t* in_end = in + g.batch * g.in_h * g.in_w * c;
  const bool short_runs = run <= 16 && g.dilation_w == 1;
  const size_t row_step = g.dilation_h * g.in_w * c, pixel_step = g.stride_w * c;
  // The output columns whose windows lie inside the image across: [ox_lo, ox_hi).
  const ptrdiff_t sw = static_cast<ptrdiff_t>(g.stride_w);
  const size_t ox_lo = static_cast<size_t>((std::max<ptrdiff_t>(g.pad_left, 0) + sw - 1) / sw);
  const ptrdiff_t last_x = in_w - static_cast<ptrdiff_t>(g.k_w) + g.pad_left;  // ix0 + k_w <= in_w
  const size_t ox_hi = last_x < 0 ? 0 : std::min(g.out_w, static_cast<size_t>(last_x / sw) + 1);
  size_t ox = 0, oy = 0, b = 0;
  for (size_t p0 = 0; p0 < pixels; p0 += mc) {
    const size_t rows = std::min(mc, pixels - p0);
    for (size_t i = 0; i < rows;) {
      uint8_t* d = windows + i * kp;
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
      const ptrdiff_t iy_last = iy0 + static_cast<ptrdiff_t>((g.k_h - 1) * g.dilation_h);
      // A run of this output row's pixels whose windows lie inside the image: each filter
      // row's run copied as one 16-byte piece, the bytes past it overwritten by the next
      // run or ignored past K (zero weights); the last piece's 16 bytes within the input.
      size_t count =
          short_runs && iy0 >= 0 && iy_last < in_h && ox >= ox_lo && ox < ox_hi ? std::min(ox_hi - ox, rows - i) : 0;
      const int8_t* s = in + ((b * g.in_h + static_cast<size_t>(std::max<ptrdiff_t>(iy0, 0))) * g.in_w +
                              static_cast<size_t>(std::max<ptrdiff_t>(ix0, 0))) *
                                 c;
      const int8_t* last_piece = s + (g.k_h - 1) * row_step;
      while (count > 0 && in_end - (last_piece + (count - 1) * pixel_step) < 16) --count;
      if (count > 0) {
        for (size_t e = 0; e < count; ++e, s += pixel_step, d += kp) {
          const int8_t* t = s;
          for (size_t ky = 0; ky < g.k_h; ++ky, t += row_step) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(t));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(d + ky * run), _mm_xor_si128(v, flip));
          }
        }
      } else {
        conv_window_rows(g, in, zero_point, p0 + i, 1, kp, one);
        for (size_t j = 0; j < kp; ++j) d[j] = static_cast<uint8_t>(one[j]) ^ 0x80u;
        count = 1;
      }
      i += count;
      ox += count;
      if (ox == g.out_w) {
        ox = 0;
        if (++oy == g.out_h) oy = 0, ++b;
      }
    }
    multiply_block(tiles, w, windows, rows, kp, out + p0 * g.out_c, g.out_c, partial, mc * kNr);
  }
}

}  // namespace edgeinf::qs8
