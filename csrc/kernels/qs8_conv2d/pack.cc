// conv2d weight preparation and the window rows of the direct kernel (portable).
#include <algorithm>
#include <cstring>

#include "../../quant/rq_params.h"
#include "conv2d.h"

namespace edgeinf::qs8 {

ConvWeights::ConvWeights(const int8_t* w, size_t out_c, size_t k_h, size_t k_w, size_t in_c, const int32_t* bias,
                         int32_t input_zero_point, Requantization rq)
    : gemm_(w, out_c, k_h * k_w * in_c, bias, input_zero_point, std::move(rq)), k_h_(k_h), k_w_(k_w), in_c_(in_c) {
  const size_t taps = k_h * k_w, padded = round_up(out_c, 16);
  tap_sums_.assign(taps * padded, 0);
  for (size_t c = 0; c < out_c; ++c) {
    for (size_t t = 0; t < taps; ++t) {
      int32_t sum = 0;
      for (size_t i = 0; i < in_c; ++i) sum += w[(c * taps + t) * in_c + i];
      tap_sums_[t * padded + c] = sum;
    }
  }
  direct_ = in_c <= kSmallInputChannels;
  avx2_direct_ = direct_ || (k_h * k_w == 1 && in_c <= kAvx2DirectPointwiseChannels);
  if (!avx2_direct_) return;
  const size_t n = out_c, k = gemm_.k(), kp2 = this->kp2(), kp4 = this->kp4();
  const int8_t* wk = gemm_.weights();
  auto at = [&](size_t c, size_t kk) -> int8_t { return c < n && kk < k ? wk[c * k + kk] : 0; };
  const Requantization& q = gemm_.requantization();
  const bool fold = left_shifts_fold(q, n);
  avx2_rq_flags_ = qs8::avx2_rq_flags(q, n, fold);
  const std::vector<int64_t> abs_sum = abs_weight_sums(wk, n, k, k, 1);
  FloatRequantization fl;
  avx2_rq_flags_ = with_float_form(avx2_rq_flags_, q, gemm_.bias_minus_zero_point_terms(), abs_sum.data(), n, &fl);

  const size_t blocks16 = (n + 15) / 16, blocks8 = (n + 7) / 8;
  const size_t run = k_w * in_c, rp = avx2_row_pairs();
  avx2_panel_.assign(blocks16 * k_h * rp * 32, 0);
  for (size_t b = 0; b < blocks16; ++b) {
    for (size_t p = 0; p < k_h * rp; ++p) {
      int16_t* dst = avx2_panel_.data() + (b * k_h * rp + p) * 32;
      const size_t ky = p / rp, e = 2 * (p % rp);
      for (size_t h = 0; h < 2; ++h) {
        for (size_t i = 0; i < 8; ++i) {
          const size_t c = b * 16 + unpack_lane_channel(h, i);
          const int32_t scale = fold && c < n ? 1 << q.left_shift[c] : 1;
          dst[h * 16 + 2 * i] = static_cast<int16_t>(at(c, ky * run + e) * scale);
          dst[h * 16 + 2 * i + 1] = static_cast<int16_t>(e + 1 < run ? at(c, ky * run + e + 1) * scale : 0);
        }
      }
    }
  }
  avx2_params_.assign(blocks16 * kRqParams * 16, 0);
  pack_rq_params(gemm_.bias_minus_zero_point_terms(), q, n, blocks16, fold, avx2_rq_flags_ & kRqFloat ? &fl : nullptr,
                 avx2_params_.data());
  if (!direct_) return;  // a pointwise layer for AVX2 only

  neon_panel_.assign(blocks8 * kp2 * 8, 0);
  for (size_t b = 0; b < blocks8; ++b) {
    for (size_t p = 0; p < kp2 / 2; ++p) {
      int8_t* dst = neon_panel_.data() + (b * kp2 / 2 + p) * 16;
      for (size_t i = 0; i < 8; ++i) {
        dst[2 * i] = at(b * 8 + i, 2 * p);
        dst[2 * i + 1] = at(b * 8 + i, 2 * p + 1);
      }
    }
  }
  neondot_panel_.assign(blocks16 * kp4 * 16, 0);
  for (size_t b = 0; b < blocks16; ++b) {
    for (size_t q4 = 0; q4 < kp4 / 4; ++q4) {
      int8_t* dst = neondot_panel_.data() + (b * kp4 / 4 + q4) * 64;
      for (size_t i = 0; i < 16; ++i) {
        for (size_t j = 0; j < 4; ++j) dst[4 * i + j] = at(b * 16 + i, 4 * q4 + j);
      }
    }
  }
}

namespace {

// Runs of a few bytes: library calls (which GCC would substitute for plain loops) cost
// more than the copy itself.
#if defined(__GNUC__) && !defined(__clang__)
#define EDGEINF_NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define EDGEINF_NO_LIBCALLS
#endif

EDGEINF_NO_LIBCALLS inline void copy_run(int8_t* d, const int8_t* s, size_t n) {
  if (n >= 8) {
    // 8-byte pieces, the last one overlapping its predecessor
    for (size_t j = 0; j + 8 < n; j += 8) std::memcpy(d + j, s + j, 8);
    std::memcpy(d + n - 8, s + n - 8, 8);
    return;
  }
  for (size_t j = 0; j < n; ++j) d[j] = s[j];
}

EDGEINF_NO_LIBCALLS inline void fill_run(int8_t* d, int8_t v, size_t n) {
  for (size_t j = 0; j < n; ++j) d[j] = v;
}

}  // namespace

EDGEINF_NO_LIBCALLS void conv_window_rows(const ConvGeometry& g, const int8_t* in, int8_t zero_point, size_t p0,
                                          size_t m, size_t kp, int8_t* dst, bool wide) {
  const size_t C = g.in_c, run = g.k_w * C, k = g.k_h * run;
  const int8_t* in_end = in + g.batch * g.in_h * g.in_w * C;
  size_t ox = p0 % g.out_w, oy = (p0 / g.out_w) % g.out_h, b = p0 / (g.out_w * g.out_h);
  const ptrdiff_t in_h = static_cast<ptrdiff_t>(g.in_h), in_w = static_cast<ptrdiff_t>(g.in_w);
  const ptrdiff_t span_w = static_cast<ptrdiff_t>((g.k_w - 1) * g.dilation_w);
  const ptrdiff_t span_h = static_cast<ptrdiff_t>((g.k_h - 1) * g.dilation_h);
  const size_t row_step = g.dilation_h * g.in_w * C, pixel_step = g.stride_w * C;
  for (size_t i = 0; i < m; ++i, dst += kp) {
    const ptrdiff_t iy0 = static_cast<ptrdiff_t>(oy * g.stride_h) - g.pad_top;
    const ptrdiff_t ix0 = static_cast<ptrdiff_t>(ox * g.stride_w) - g.pad_left;
    if (wide && run <= 16 && g.dilation_w == 1 && iy0 >= 0 && iy0 + span_h < in_h && ix0 >= 0 && ix0 + span_w < in_w) {
      // A run of pixels of this output row whose windows lie inside the image (and whose
      // last 16-byte read inside the input): each filter row one 16-byte copy, no checks
      // per pixel or filter row.
      const int8_t* s = in + ((b * g.in_h + static_cast<size_t>(iy0)) * g.in_w + static_cast<size_t>(ix0)) * C;
      const ptrdiff_t last_end = (s - in) + static_cast<ptrdiff_t>((g.k_h - 1) * row_step) + 16;
      const ptrdiff_t room = (in_end - in) - last_end;
      if (room >= 0) {
        const size_t by_width = static_cast<size_t>(in_w - 1 - span_w - ix0) / g.stride_w + 1;
        const size_t by_end = static_cast<size_t>(room) / pixel_step + 1;
        const size_t count = std::min({m - i, g.out_w - ox, by_width, by_end});
        if (g.k_h == 3) {
          for (size_t j = 0; j < count; ++j, s += pixel_step, dst += kp) {
            std::memcpy(dst, s, 16);
            std::memcpy(dst + run, s + row_step, 16);
            std::memcpy(dst + 2 * run, s + 2 * row_step, 16);
          }
        } else {
          for (size_t j = 0; j < count; ++j, s += pixel_step, dst += kp) {
            for (size_t ky = 0; ky < g.k_h; ++ky) std::memcpy(dst + ky * run, s + ky * row_step, 16);
          }
        }
        // the outer loop's step past the run's last pixel
        i += count - 1, ox += count - 1, dst -= kp;
        if (++ox == g.out_w) {
          ox = 0;
          if (++oy == g.out_h) {
            oy = 0;
            ++b;
          }
        }
        continue;
      }
    }
    const bool inside_w = ix0 >= 0 && ix0 + span_w < in_w;
    int8_t* d = dst;
    for (size_t ky = 0; ky < g.k_h; ++ky, d += run) {
      const ptrdiff_t iy = iy0 + static_cast<ptrdiff_t>(ky * g.dilation_h);
      if (iy < 0 || iy >= in_h) {
        fill_run(d, zero_point, run);
        continue;
      }
      const int8_t* row = in + (b * g.in_h + static_cast<size_t>(iy)) * g.in_w * C;
      if (inside_w && g.dilation_w == 1) {
        const int8_t* s = row + ix0 * static_cast<ptrdiff_t>(C);
        if (wide && run <= 16 && in_end - s >= 16) {
          std::memcpy(d, s, 16);  // past the run: later rows overwrite it, or K..kp ignores it
        } else {
          copy_run(d, s, run);
        }
        continue;
      }
      for (size_t kx = 0; kx < g.k_w; ++kx) {
        const ptrdiff_t ix = ix0 + static_cast<ptrdiff_t>(kx * g.dilation_w);
        const bool inside = ix >= 0 && ix < in_w;
        for (size_t c = 0; c < C; ++c) d[kx * C + c] = inside ? row[ix * static_cast<ptrdiff_t>(C) + c] : zero_point;
      }
    }
    if (!wide) fill_run(dst + k, 0, kp - k);
    if (++ox == g.out_w) {
      ox = 0;
      if (++oy == g.out_h) {
        oy = 0;
        ++b;
      }
    }
  }
}

}  // namespace edgeinf::qs8
