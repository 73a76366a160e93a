// Weight preparation shared by every path: bias terms, packed panels.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "gemm.h"

namespace edgeinf::qs8 {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

GemmWeights::GemmWeights(const int8_t* w, size_t n, size_t k, const int32_t* bias, int32_t input_zero_point,
                         Requantization rq, std::vector<double> double_scale)
    : n_(n),
      k_(k),
      input_zero_point_(input_zero_point),
      weights_negatable_(std::find(w, w + n * k, int8_t{-128}) == w + n * k),
      w_(w, w + n * k),
      rq_(std::move(rq)),
      double_scale_(std::move(double_scale)) {
  // Preconditions, checked by the bindings (bindings/quant_arrays.h).
  assert(n > 0 && k > 0);
  assert(input_zero_point >= -128 && input_zero_point <= 127);
  assert(rq_.channels() == n);
  const size_t padded = round_up(n, 16);
  fold_input_zero_point(w, bias, input_zero_point, n, k, k, 1, padded, &bias_, &bias_zp_);
  // The VPDPBUSD paths read the inputs offset to u8 (x + 128): their start folds zp + 128.
  std::vector<int32_t> bias_copy;
  fold_input_zero_point(w, bias, input_zero_point + 128, n, k, k, 1, padded, &bias_copy, &bias_u8_);
  rq_.pad_to(padded);
  if (!double_scale_.empty()) {
    assert(double_scale_.size() == n);
    assert(
        std::all_of(double_scale_.begin(), double_scale_.end(), [](double s) { return s >= 0.0 && std::isfinite(s); }));
    double_scale_.resize(padded, 0.0);
  }
  shifts_right_only_ =
      double_scale_.empty() &&
      std::all_of(rq_.left_shift.begin(), rq_.left_shift.begin() + n, [](int32_t l) { return l == 0; }) &&
      std::all_of(rq_.right_shift.begin(), rq_.right_shift.begin() + n, [](int32_t r) { return r >= 1; });
  // Accumulators: bias + (a - zero_point) * w in the tiles, bias_zp + a * w in the GEMV.
  std::vector<int64_t> bound = abs_weight_sums(w, n, k, k, 1);
  for (size_t c = 0; c < n; ++c) {
    bound[c] = std::max(std::abs(int64_t{bias_[c]}) + 255 * bound[c], std::abs(int64_t{bias_zp_[c]}) + 128 * bound[c]);
  }
  const double* ds = double_scale_.empty() ? nullptr : double_scale_.data();
  if (fit_float_requantization(rq_, bound.data(), n, false, ds, &float_rq_)) {
    float_rq_.scale.resize(padded, 0.0f), float_rq_.offset.resize(padded, 0.0f),
        float_rq_.offset_neg.resize(padded, 0.0f);
    return;
  }
  if (!shifts_right_only_) return;
  guarded_rq_.split = true;
  guarded_rq_.scale.assign(padded, 0.0f), guarded_rq_.offset.assign(padded, 0.0f),
      guarded_rq_.offset_neg.assign(padded, 0.0f);
  for (size_t c = 0; c < n; ++c) {
    // Exact in double, each rounded once to float.
    const int r = rq_.right_shift[c];
    const double d = std::ldexp(1.0, -r - 1), zp = rq_.output_zero_point;
    guarded_rq_.scale[c] = static_cast<float>(std::ldexp(static_cast<double>(rq_.multiplier[c]), -31 - r));
    guarded_rq_.offset[c] = static_cast<float>(zp + d), guarded_rq_.offset_neg[c] = static_cast<float>(zp - d);
  }
}

const int8_t* GemmWeights::packed(const PackLayout& layout) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& entry : packs_) {
    if (entry.layout == layout) return entry.data;
  }
  const size_t kq = layout.kq;
  const size_t kp = round_up(k_, layout.kpad);
  const size_t blocks = round_up(n_, layout.nr) / layout.nr;
  const size_t elem = layout.wide ? sizeof(int16_t) : sizeof(int8_t);
  const size_t columns = (blocks - 1) * layout.nr + layout.panel_width(blocks - 1, n_);
  // Panels start on a cache line (malloc aligns to 16): an AMX tile's 64-byte rows each
  // read one line.
  std::vector<int8_t> storage(columns * kp * elem + 63, 0);
  int8_t* out = storage.data() + (-reinterpret_cast<uintptr_t>(storage.data()) & 63);
  size_t i = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t width = layout.panel_width(b, n_);
    for (size_t k0 = 0; k0 < kp; k0 += kq) {
      for (size_t c = 0; c < width; ++c) {
        const size_t col = b * layout.nr + c;
        for (size_t q = 0; q < kq; ++q, ++i) {
          const size_t kk = k0 + q;
          const int8_t v = (col < n_ && kk < k_) ? w_[col * k_ + kk] : 0;
          if (layout.wide) {
            const int16_t v16 = v;
            std::memcpy(out + 2 * i, &v16, sizeof(v16));
          } else {
            out[i] = v;
          }
        }
      }
    }
  }
  packs_.push_back(Pack{layout, std::move(storage), out});  // moving keeps the bytes where they are
  return out;
}

// Segments of up to kInlineSegment bytes in whole 16-byte blocks are copied by 16-byte
// moves in place: a call to memcpy per tap (a 3x3 convolution of 64 channels copies 9
// segments of 64 bytes a pixel) costs more than the copy.
constexpr size_t kInlineSegment = 256;

void gather_rows(const GemmRows& a, size_t m0, size_t rows, int8_t* dst, size_t stride) {
  // in locals: an int8 store may alias `a`, whose fields would be read again after each
  const size_t k = a.k(), taps = a.taps, len = a.seg;
  const bool inline_copy = len % 16 == 0 && len <= kInlineSegment;
  for (size_t r = 0; r < rows; ++r) {
    int8_t* d = dst + r * stride;
    const int8_t* const* seg = a.ptrs + (m0 + r) * taps;
    if (inline_copy) {
      for (size_t t = 0; t < taps; ++t, d += len) {
        size_t i = 0;
        for (; i + 64 <= len; i += 64) std::memcpy(d + i, seg[t] + i, 64);
        for (; i < len; i += 16) std::memcpy(d + i, seg[t] + i, 16);
      }
    } else {
      for (size_t t = 0; t < taps; ++t, d += len) std::memcpy(d, seg[t], len);
    }
    if (stride > k) std::memset(dst + r * stride + k, 0, stride - k);
  }
}

}  // namespace edgeinf::qs8
