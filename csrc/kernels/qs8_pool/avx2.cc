// AVX2 pooling. Average: 16 channels per step (a channel count past 16 that is not a
// multiple of 16 ends with a block overlapping the one before); fewer than 16 channels and
// oversized average windows take the scalar path for those outputs. Max: row by row, each
// output pixel's taps reduced 32 (or, below 32 channels, 16) channels at a time with the
// last piece overlapping the one before (a maximum is its own on overlap), windows inside
// the image on a loop unrolled for the usual 2x2 and 3x3 filters; fewer than 16 channels
// take the scalar path.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "../../quant/avx2_inl.h"
#include "pool.h"
#include "pool_simd_inl.h"

namespace edgeinf::qs8 {
namespace {

// (sum +- count/2) / count truncated, through float: exact for |sum| < 2^22.
inline __m256i average8(__m256i sum, __m256i half, __m256 count_f) {
  const __m256i negative = _mm256_cmpgt_epi32(_mm256_setzero_si256(), sum);
  // sum > 0: + half; sum <= 0: - half (sum == 0 gives -half / count = 0 either way)
  const __m256i numer = _mm256_add_epi32(sum, _mm256_sub_epi32(_mm256_xor_si256(half, negative), negative));
  return _mm256_cvttps_epi32(_mm256_div_ps(_mm256_cvtepi32_ps(numer), count_f));
}

inline __m128i load16(const int8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

struct MaxBlock {
  static constexpr bool kOverlapTail = true;
  explicit MaxBlock(const PoolGeometry& g)
      : lo(_mm_set1_epi8(static_cast<int8_t>(g.act_min))), hi(_mm_set1_epi8(static_cast<int8_t>(g.act_max))) {}
  void start() { m = _mm_set1_epi8(-128); }
  void add(const int8_t* p) { m = _mm_max_epi8(m, load16(p)); }
  void store(int8_t* o, size_t) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_min_epi8(_mm_max_epi8(m, lo), hi));
  }
  __m128i lo, hi, m;
};

struct AverageBlock {
  static constexpr bool kOverlapTail = true;
  explicit AverageBlock(const PoolGeometry& g) : lo(_mm256_set1_epi32(g.act_min)), hi(_mm256_set1_epi32(g.act_max)) {}
  void start() { s0 = s1 = _mm256_setzero_si256(); }
  void add(const int8_t* p) {
    const __m128i v = load16(p);
    s0 = _mm256_add_epi32(s0, _mm256_cvtepi8_epi32(v));
    s1 = _mm256_add_epi32(s1, _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)));
  }
  void store(int8_t* o, size_t count) const {
    const __m256i half = _mm256_set1_epi32(static_cast<int32_t>(count / 2));
    const __m256 cf = _mm256_set1_ps(static_cast<float>(count));
    const __m256i a0 = _mm256_min_epi32(_mm256_max_epi32(average8(s0, half, cf), lo), hi);
    const __m256i a1 = _mm256_min_epi32(_mm256_max_epi32(average8(s1, half, cf), lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), avx2::pack16(a0, a1));
  }
  __m256i lo, hi, s0, s1;
};

// 32 or 16 channels per vector.
struct Ymm {
  using V = __m256i;
  static constexpr size_t kBytes = 32;
  static V set1(int32_t x) { return _mm256_set1_epi8(static_cast<char>(x)); }
  static V load(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static V max(V a, V b) { return _mm256_max_epi8(a, b); }
  static V min(V a, V b) { return _mm256_min_epi8(a, b); }
  static void store(int8_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
};
struct Xmm {
  using V = __m128i;
  static constexpr size_t kBytes = 16;
  static V set1(int32_t x) { return _mm_set1_epi8(static_cast<char>(x)); }
  static V load(const int8_t* p) { return load16(p); }
  static V max(V a, V b) { return _mm_max_epi8(a, b); }
  static V min(V a, V b) { return _mm_min_epi8(a, b); }
  static void store(int8_t* p, V v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
};

// One output pixel (C >= Ops::kBytes channels): the maximum of rows[0..ny) + at + fx * C,
// fx < nx, started from the activation's minimum (so only the upper clamp is left). NY and
// NX fix the counts at compile time where nonzero.
template <class Ops, size_t NY, size_t NX>
inline void max_pixel(const int8_t* const* rows, size_t ny, size_t nx, size_t at, size_t C, typename Ops::V floor,
                      typename Ops::V ceiling, int8_t* o) {
  const size_t ry = NY ? NY : ny, rx = NX ? NX : nx;
  for (size_t c = 0;; c += Ops::kBytes) {
    c = std::min(c, C - Ops::kBytes);  // the last piece may overlap the one before
    typename Ops::V m = floor;
    for (size_t fy = 0; fy < ry; ++fy) {
      const int8_t* p = rows[fy] + at + c;
      for (size_t fx = 0; fx < rx; ++fx) m = Ops::max(m, Ops::load(p + fx * C));
    }
    Ops::store(o + c, Ops::min(m, ceiling));
    if (c + Ops::kBytes >= C) break;
  }
}

// Output pixels [ox0, ox1) of one row whose windows lie inside the image horizontally
// (filter_w taps from column ox * stride_w - pad_left), over the ny input rows at `rows`.
template <class Ops, size_t NY, size_t NX>
void max_row_inside(const PoolGeometry& g, const int8_t* const* rows, size_t ny, size_t ox0, size_t ox1,
                    typename Ops::V floor, typename Ops::V ceiling, int8_t* o) {
  const size_t C = g.channels;
  for (size_t ox = ox0; ox < ox1; ++ox) {
    const size_t at = (ox * g.stride_w - static_cast<size_t>(g.pad_left)) * C;
    max_pixel<Ops, NY, NX>(rows, ny, g.filter_w, at, C, floor, ceiling, o + ox * C);
  }
}

template <class Ops>
void maxpool(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  const size_t C = g.channels, fw = g.filter_w, sw = g.stride_w;
  const typename Ops::V floor = Ops::set1(g.act_min), ceiling = Ops::set1(g.act_max);
  // Columns whose windows lie inside the image: [inside0, inside1).
  const size_t pad_left = static_cast<size_t>(std::max<ptrdiff_t>(g.pad_left, 0));
  size_t inside0 = std::min(g.out_w, (pad_left + sw - 1) / sw);
  size_t inside1 = g.in_w + pad_left >= fw ? std::min(g.out_w, (g.in_w + pad_left - fw) / sw + 1) : 0;
  if (g.pad_left < 0 || inside1 < inside0) inside0 = inside1 = 0;  // every column clipped
  std::vector<const int8_t*> rows(g.filter_h);
  for (size_t b = 0; b < g.batch; ++b) {
    for (size_t oy = 0; oy < g.out_h; ++oy) {
      size_t y0, y1;
      pool_window(oy, g.stride_h, g.pad_top, g.filter_h, g.in_h, &y0, &y1);
      const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
      const size_t ny = y1 - y0;
      for (size_t i = 0; i < ny; ++i) {
        rows[i] = in + (b * g.in_h + static_cast<size_t>(iy0 + static_cast<ptrdiff_t>(y0 + i))) * g.in_w * C;
      }
      int8_t* o = out + (b * g.out_h + oy) * g.out_w * C;
      // Clipped columns (and windows with no value, which the reference leaves at the
      // clamped -128): each window's own taps.
      auto clipped = [&](size_t ox) {
        size_t x0, x1;
        pool_window(ox, sw, g.pad_left, fw, g.in_w, &x0, &x1);
        const size_t at =
            static_cast<size_t>(static_cast<ptrdiff_t>(ox * sw) - g.pad_left + static_cast<ptrdiff_t>(x0)) * C;
        if (ny == 0 || x1 == x0) {
          std::fill(o + ox * C, o + (ox + 1) * C, static_cast<int8_t>(std::min(std::max(-128, g.act_min), g.act_max)));
          return;
        }
        max_pixel<Ops, 0, 0>(rows.data(), ny, x1 - x0, at, C, floor, ceiling, o + ox * C);
      };
      for (size_t ox = 0; ox < inside0; ++ox) clipped(ox);
      if (ny == 0) {
        for (size_t ox = inside0; ox < inside1; ++ox) clipped(ox);
      } else if (ny == 2 && fw == 2) {
        max_row_inside<Ops, 2, 2>(g, rows.data(), ny, inside0, inside1, floor, ceiling, o);
      } else if (ny == 3 && fw == 3) {
        max_row_inside<Ops, 3, 3>(g, rows.data(), ny, inside0, inside1, floor, ceiling, o);
      } else {
        max_row_inside<Ops, 0, 0>(g, rows.data(), ny, inside0, inside1, floor, ceiling, o);
      }
      for (size_t ox = std::max(inside0, inside1); ox < g.out_w; ++ox) clipped(ox);
    }
  }
}

}  // namespace

void qs8_maxpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  if (g.channels >= 32) return maxpool<Ymm>(g, in, out);
  if (g.channels >= 16) return maxpool<Xmm>(g, in, out);
  pool_simd::pool<true, MaxBlock>(g, in, out);  // the scalar reference's loop for every pixel
}
void qs8_avgpool__avx2(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  pool_simd::pool<false, AverageBlock>(g, in, out);
}

}  // namespace edgeinf::qs8
