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

// The epilogue of column group [col0, col0 + ncols) for the fused tiles (as the GEMM's).
DotOutput fused_output(const GemmWeights& w, bool float_form, size_t col0, size_t ncols, size_t out_stride) {
  const FloatRequantization* fl = w.float_requantization();
  const Requantization& rq = w.requantization();
  DotOutput o{};
  o.split = float_form && fl->split;
  if (float_form) {
    o.scale = fl->scale.data() + col0, o.offset = fl->offset.data() + col0;
    o.offset_neg = fl->offset_neg.data() + col0;
  }
  o.multiplier = rq.multiplier.data() + col0, o.left_shift = rq.left_shift.data() + col0;
  o.right_shift = rq.right_shift.data() + col0, o.zero_point = rq.output_zero_point;
  o.act_min = rq.act_min, o.act_max = rq.act_max;
  o.out_stride = out_stride, o.ncols = ncols;
  return o;
}

// The input with its padding: pad_top rows above, pad_left columns left, and enough below
// and right for every window; images padded_h x padded_w pixels.
struct PaddedInput {
  size_t padded_h, padded_w, pad_top, pad_left;
  explicit PaddedInput(const ConvGeometry& g)
      : pad_top(static_cast<size_t>(g.pad_top)), pad_left(static_cast<size_t>(g.pad_left)) {
    padded_h = std::max(pad_top + g.in_h, (g.out_h - 1) * g.stride_h + (g.k_h - 1) * g.dilation_h + 1);
    padded_w = std::max(pad_left + g.in_w, (g.out_w - 1) * g.stride_w + (g.k_w - 1) * g.dilation_w + 1);
  }
  size_t values(const ConvGeometry& g) const { return g.batch * padded_h * padded_w * g.in_c; }
};

// The padded uint8 copy of `in` into dst (p.values(g) bytes).
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

}  // namespace

void qs8_conv2d_indirect_dot(const DotIndirectTiles& wide, const DotIndirectTiles& narrow, const ConvWeights& cw,
                             const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const GemmWeights& w = cw.gemm();
  const size_t taps = g.k_h * g.k_w, c = g.in_c;
  if (taps == 1 || c % 4 != 0 || g.pad_top < 0 || g.pad_left < 0) return qs8_conv2d__gemm(w, g, in, out);
  const size_t pixels = g.batch * g.out_h * g.out_w;
  if (pixels == 0) return;
  const size_t n = w.n();
  const DotIndirectTiles& tiles = n <= kNr ? narrow : wide;
  const size_t mr = tiles.mr, nc = tiles.nc;

  const PaddedInput p(g);
  uint8_t* a = scratch<uint8_t, 6>(p.values(g));
  copy_padded(g, p, in, static_cast<uint8_t>(w.input_zero_point() + 128), a);
  ptrdiff_t* tap_offset = scratch<ptrdiff_t, 0>(taps);
  for (size_t ky = 0; ky < g.k_h; ++ky) {
    for (size_t kx = 0; kx < g.k_w; ++kx) {
      tap_offset[ky * g.k_w + kx] = static_cast<ptrdiff_t>((ky * g.dilation_h * p.padded_w + kx * g.dilation_w) * c);
    }
  }

  const int8_t* packed = w.packed(kDotLayout);
  const size_t panel_bytes = w.k() * kNr, blocks = (n + kNr - 1) / kNr, groups = (blocks + nc - 1) / nc;
  const int32_t* start = w.bias_minus_u8_zero_point_terms();
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

  const uint8_t* origins[kDotMaxRows];
  const size_t image = p.padded_h * p.padded_w * c, row_step = g.stride_h * p.padded_w * c, step = g.stride_w * c;
  // The window origin of output pixel (b, oy, ox), kept as the pixels advance.
  size_t ox = 0;
  const uint8_t* row_origin = a;
  for (size_t p0 = 0; p0 < pixels; p0 += mr) {
    const size_t count = std::min(mr, pixels - p0);
    for (size_t r = 0; r < count; ++r) {
      origins[r] = row_origin + ox * step;
      if (++ox == g.out_w) {
        ox = 0;
        row_origin += row_step;
        // the next image starts after this one's last output row
        const size_t done = p0 + r + 1;
        if (done % (g.out_h * g.out_w) == 0) row_origin = a + done / (g.out_h * g.out_w) * image;
      }
    }
    int8_t* tile_out = out + p0 * n;
    for (size_t j = 0; j < groups; ++j) {
      const size_t col0 = j * nc * kNr, panels = std::min(nc, blocks - j * nc);
      DotOutput* o = fused ? &outputs[j] : nullptr;
      if (fused) o->out = tile_out + col0;
      tiles.panels[panels].tile[count](origins, tap_offset, taps, c / 4, packed + col0 * w.k(), panel_bytes,
                                       start + col0, partial, acc_stride, o);
      if (fused) continue;
      for (size_t q = 0; q < panels; ++q) {
        const size_t c0 = col0 + q * kNr;
        qs8_gemm_requantize_rows__avx2(w, c0, std::min(kNr, n - c0), partial + q * acc_stride, count, tile_out + c0, n);
      }
    }
  }
}

}  // namespace edgeinf::qs8
