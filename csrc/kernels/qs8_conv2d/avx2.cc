// AVX2 direct conv2d for few input channels (conv2d.h): 6 output pixels x 16 output
// channels per tile, two K values per VPMADDWD.
//
// A tile broadcasts a pair of int16 input values of each of its 6 pixels and multiplies it
// with the packed weight pairs of 16 channels (int16 products of int8 values: a pair sum
// is at most 2 * 128 * 128, exact in int32). Pairs never straddle two filter rows (the
// panel pads each row's run with a zero weight), so they are read straight from input
// rows widened to int16 once per call: with dilation 1 across, a window's filter row is a
// contiguous run of such a row, and 6 adjacent output pixels are runs stride * in_c values
// apart. Widened rows carry the input zero point in the padding columns; rows outside the
// image are all zero points. Other geometries (dilation across) copy each window first.
// Accumulators start from bias - zero_point * sum(w), so a padded tap adds
// zp * w - zp * w = 0 like the reference's skipped tap, and the total equals the
// reference accumulator modulo 2^32. Accumulators are in rq_params.h's lane order,
// requantized by rq_avx2_inl.h.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "../../quant/avx2_inl.h"
#include "../../quant/rq_avx2_inl.h"
#include "conv2d.h"

namespace edgeinf::qs8 {
namespace {

using namespace avx2_rq;

constexpr size_t kRows = 6;

inline __m256i broadcast_pair(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Pixels [0, kRows) times one 16-channel block. Filter row ky of pixel r starts at
// rows[ky] + r * pixel_stride; each has rp pairs. Stores `npix` pixels of `ncols` channels
// at out (pixel stride out_stride).
template <int kRq>
void tile(const int16_t* const* rows, size_t k_h, size_t rp, size_t pixel_stride, const int16_t* panel,
          const int32_t* prm, const Output& q, size_t npix, size_t ncols, int8_t* out, size_t out_stride) {
  __m256i acc[kRows][2];
  const __m256i s0 = load(prm + kRqStart * 16), s1 = load(prm + kRqStart * 16 + 8);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    acc[r][0] = s0;
    acc[r][1] = s1;
  }
  for (size_t ky = 0; ky < k_h; ++ky) {
    const int16_t* a = rows[ky];
    for (size_t j = 0; j < rp; ++j, a += 2, panel += 32) {
      const __m256i w0 = load(panel), w1 = load(panel + 16);
#pragma GCC unroll 6
      for (size_t r = 0; r < kRows; ++r) {
        const __m256i av = broadcast_pair(a + r * pixel_stride);
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, w0));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, w1));
      }
    }
  }
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    if (r >= npix) break;
    const __m128i v = requantize16<kRq>(acc[r][0], acc[r][1], prm, q);
    avx2::store_bytes(out + r * out_stride, v, ncols);
  }
}

// All blocks of `npix` pixels whose filter rows start at rows[ky] (pixel stride apart).
template <int kRq>
inline void pixels(const ConvWeights& w, const int16_t* const* rows, size_t pixel_stride, const Output& q, size_t npix,
                   size_t n, int8_t* out) {
  const size_t k_h = w.k_h(), rp = w.avx2_row_pairs();
  for (size_t b = 0; b * 16 < n; ++b) {
    tile<kRq>(rows, k_h, rp, pixel_stride, w.avx2_panel() + b * k_h * rp * 32, w.avx2_params() + b * kRqParams * 16, q,
              npix, std::min<size_t>(16, n - b * 16), out + b * 16, n);
  }
}

// Dilation 1 across: input rows widened once into a ring (a window's rows are consecutive
// modulo its height), each row as [pad_left zero-point columns][in_w columns][zero points
// up to the last window's end, plus slack for the zero-weight partner and the tile's
// unused pixels].
template <int kRq>
void run_widened(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t C = g.in_c, S = g.stride_w, n = g.out_c;
  const size_t pad_left = static_cast<size_t>(g.pad_left);
  const size_t cols = std::max(pad_left + g.in_w, (g.out_w + kRows) * S + g.k_w);
  const size_t row_len = cols * C + 16;
  const size_t slots = (g.k_h - 1) * g.dilation_h + 1;
  const int16_t zp = static_cast<int16_t>(w.input_zero_point());
  std::vector<int16_t> ring(slots * row_len), zero_row(row_len, zp);
  std::vector<ptrdiff_t> tags(slots, -1);
  std::vector<const int16_t*> rows(g.k_h), tile_rows(g.k_h);
  const Output q(w.gemm().requantization());
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      for (size_t ky = 0; ky < g.k_h; ++ky) {
        const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
        if (iy < 0 || iy >= static_cast<ptrdiff_t>(g.in_h)) {
          rows[ky] = zero_row.data();
          continue;
        }
        const size_t index = b * g.in_h + static_cast<size_t>(iy), slot = index % slots;
        int16_t* dst = ring.data() + slot * row_len;
        if (tags[slot] != static_cast<ptrdiff_t>(index)) {
          const int8_t* src = in + index * g.in_w * C;
          std::fill(dst, dst + row_len, zp);
          int16_t* d = dst + pad_left * C;
          size_t i = 0;
          for (; i + 16 <= g.in_w * C; i += 16) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
          }
          for (; i < g.in_w * C; ++i) d[i] = src[i];
          tags[slot] = static_cast<ptrdiff_t>(index);
        }
        rows[ky] = dst;
      }
      int8_t* orow = out + (b * g.out_h + oy) * g.out_w * n;
      for (size_t ox = 0; ox < g.out_w; ox += kRows) {
        for (size_t ky = 0; ky < g.k_h; ++ky) tile_rows[ky] = rows[ky] + ox * S * C;
        pixels<kRq>(w, tile_rows.data(), S * C, q, std::min(kRows, g.out_w - ox), n, orow + ox * n);
      }
    }
  }
}

// Any other geometry: each window copied (conv_window_rows), then widened into filter rows
// of 2 * rp values, chunk by chunk of output pixels.
template <int kRq>
void run_windows(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t n = g.out_c, run = g.k_w * g.in_c, k = g.k_h * run, rp = w.avx2_row_pairs(), kpad = g.k_h * 2 * rp;
  const size_t pixels_total = g.batch * g.out_h * g.out_w;
  const size_t chunk = std::min<size_t>(std::max<size_t>(kRows, (8192 / kpad) / kRows * kRows),
                                        (pixels_total + kRows - 1) / kRows * kRows);
  std::vector<int8_t> a8(chunk * k);
  std::vector<int16_t> a16(chunk * kpad, 0);
  std::vector<const int16_t*> rows(g.k_h);
  const Output q(w.gemm().requantization());
  const int8_t zp = static_cast<int8_t>(w.input_zero_point());
  for (size_t p0 = 0; p0 < pixels_total; p0 += chunk) {
    const size_t m = std::min(chunk, pixels_total - p0);
    conv_window_rows(g, in, zp, p0, m, k, a8.data());
    for (size_t i = 0; i < m; ++i) {
      for (size_t ky = 0; ky < g.k_h; ++ky) {
        for (size_t e = 0; e < run; ++e) a16[i * kpad + ky * 2 * rp + e] = a8[i * k + ky * run + e];
      }
    }
    for (size_t r0 = 0; r0 < m; r0 += kRows) {
      for (size_t ky = 0; ky < g.k_h; ++ky) rows[ky] = a16.data() + r0 * kpad + ky * 2 * rp;
      pixels<kRq>(w, rows.data(), kpad, q, std::min(kRows, m - r0), n, out + (p0 + r0) * n);
    }
  }
}

}  // namespace

void qs8_conv2d_direct__avx2(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const bool widened = g.dilation_w == 1 && g.pad_left >= 0;
  with_rq_flags(call_flags(w.avx2_rq_flags()), [&](auto flags) {
    if (widened) return run_widened<flags()>(w, g, in, out);
    run_windows<flags()>(w, g, in, out);
  });
}

}  // namespace edgeinf::qs8
