// int8 GEMM with per-channel requantization: the engine of fully connected and conv2d.
//
//   out[m][n] = requantize( bias[n] + sum_k w[n][k] * (a[m][k] - input_zero_point) )
//
// exactly as TFLite's reference FullyConnected / ConvPerChannel compute it (int32
// accumulation, wrapping; weights symmetric). Row m of A is given indirectly, as `taps`
// segments of `seg` contiguous values (XNNPACK's indirection idea): a fully connected
// row is one segment of K values, a convolution row is one segment of Cin values per
// filter tap, a padded tap pointing at a buffer of zero points (which adds nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "../../quant/requantization.h"
#include "../../quant/rq_params.h"

namespace edgeinf::qs8 {

// Weight layouts of the SIMD paths: [n/nr][kpad/kq][nr columns][kq values of K], zero
// padded, with K padded to a multiple of kpad; mr is the matching tile height.
// `wide` panels hold int16 (sign-extended once at packing) instead of int8. With
// `narrow_tail` the last panel holds only the columns left, rounded up to 8.
struct PackLayout {
  size_t nr, kq, kpad, mr;
  bool wide = false;
  bool narrow_tail = false;
  bool operator==(const PackLayout& o) const {
    return nr == o.nr && kq == o.kq && kpad == o.kpad && wide == o.wide && narrow_tail == o.narrow_tail;
  }
  // Columns of panel b (of a matrix of n columns).
  size_t panel_width(size_t b, size_t n) const {
    const size_t left = n - b * nr;
    return narrow_tail && left < nr ? (left + 7) / 8 * 8 : nr;
  }
};
inline constexpr PackLayout kAvx2Layout{16, 2, 2, 6};            // pairs of K, sign-extended in the kernel (few rows)
inline constexpr PackLayout kAvx2WideLayout{16, 2, 2, 6, true};  // pairs of K as int16 (many rows)
inline constexpr PackLayout kAvx2GemvLayout{16, 4, 4, 1};        // quads of K for VPMADDUBSW (one row)
inline constexpr PackLayout kDotLayout{16, 4, 4, 0};             // quads of K for VPDPBUSD (dot_gemm.h)
inline constexpr PackLayout kNeonLayout{8, 2, 2, 6};             // pairs of K for VMULL + VPADAL
inline constexpr PackLayout kNeonK16Layout{8, 16, 16, 3};        // runs of 16 K for VMULL of whole rows (long K)
inline constexpr PackLayout kNeonDotLayout{8, 4, 4, 8};          // quads of K for SDOT, A rows read to K exactly
// The SDOT batch-1 GEMV's: quads of K, 32 columns a panel, the last one narrowed.
inline constexpr PackLayout kNeonDotRowLayout{32, 4, 16, 1, false, true};

size_t round_up(size_t x, size_t m);

class GemmWeights {
 public:
  // w is [n][k] row-major; bias may be null (zeros). With `double_scale` (one factor
  // per output channel) the accumulators are requantized in double as TFLite's
  // reference FULLY_CONNECTED does (rq then only supplies the zero point and the
  // clamp); without it, with rq's fixed-point multipliers as CONV_2D does.
  // Expects n, k > 0 and an int8 input zero point (asserted; the bindings check them).
  GemmWeights(const int8_t* w, size_t n, size_t k, const int32_t* bias, int32_t input_zero_point, Requantization rq,
              std::vector<double> double_scale = {});

  size_t n() const { return n_; }
  size_t k() const { return k_; }
  int32_t input_zero_point() const { return input_zero_point_; }
  const int8_t* weights() const { return w_.data(); }   // [n][k]
  const int32_t* bias() const { return bias_.data(); }  // [n padded to 16]
  // bias[c] - input_zero_point * sum_k w[c][k]: the accumulator start of paths that
  // multiply raw int8 activations (NEON), padded to 16 entries.
  const int32_t* bias_minus_zero_point_terms() const { return bias_zp_.data(); }
  // bias[c] - (input_zero_point + 128) * sum_k w[c][k]: the accumulator start of paths
  // that multiply activations offset to uint8 (a + 128; VPDPBUSD), padded to 16 entries.
  const int32_t* bias_minus_u8_zero_point_terms() const { return bias_u8_.data(); }
  const Requantization& requantization() const { return rq_; }  // padded to 16 channels
  bool requantizes_in_double() const { return !double_scale_.empty(); }
  // The fixed-point requantization (not double), every channel shifting right by at least
  // one bit and none left: its short form applies (neon::mbqm_right).
  bool shifts_right_only() const { return shifts_right_only_; }
  // No weight is -128, so sign(w) * w and w negated stay in int8: TFLite's symmetric
  // int8 weights ([-127, 127]) always qualify.
  bool weights_negatable() const { return weights_negatable_; }
  const double* double_scale() const { return double_scale_.data(); }  // padded to 16 channels
  // The AVX2 epilogue's float form of the requantization (rq_params.h), fixed-point or
  // double, padded to 16 channels, or null where it was not found exact.
  const FloatRequantization* float_requantization() const { return float_rq_.scale.empty() ? nullptr : &float_rq_; }
  // Where that form is not exact but every channel shifts right and none left: float(M)
  // and offsets zp +- 2^-(r+1), to which the AVX-512 tiles add a check per vector
  // (avx512vnni.cc), padded to 16 channels; else null.
  const FloatRequantization* guarded_float_requantization() const {
    return guarded_rq_.scale.empty() ? nullptr : &guarded_rq_;
  }

  // The requantization of one accumulator of channel c, either way.
  int8_t requantize(int32_t acc, size_t c) const {
    return double_scale_.empty() ? requantize_one(acc, rq_, c) : requantize_double(acc, double_scale_[c], rq_);
  }

  // Packed panels for a layout, built on first use (thread-safe) and kept.
  const int8_t* packed(const PackLayout& layout) const;

 private:
  size_t n_, k_;
  int32_t input_zero_point_;
  bool weights_negatable_;
  bool shifts_right_only_ = false;
  std::vector<int8_t> w_;
  std::vector<int32_t> bias_, bias_zp_, bias_u8_;
  Requantization rq_;
  std::vector<double> double_scale_;
  FloatRequantization float_rq_, guarded_rq_;
  mutable std::mutex mu_;
  struct Pack {
    PackLayout layout;
    std::vector<int8_t> storage;
    const int8_t* data;  // in storage, on a 64-byte boundary
  };
  mutable std::vector<Pack> packs_;
};

// Row m of A = concatenation of segments rows[m * taps + t], t < taps, each `seg` long.
struct GemmRows {
  const int8_t* const* ptrs;
  size_t m, taps, seg;
  // Nonzero where the caller's rows lie evenly spaced, ptrs[r] == ptrs[0] + r * stride (a
  // pointwise convolution's pixels, a batch of FC rows): the NEON paths then read them in
  // place instead of copying them, the VPDPBUSD and AMX paths offset them in one pass.
  size_t stride = 0;
  size_t k() const { return taps * seg; }
};

// Rows already as int16 (a - input_zero_point), each `taps` segments of `seg` values with
// seg even, so that no pair of K straddles two segments: a convolution's input converted
// once per call, where GemmRows would convert each pixel once per filter tap.
struct GemmRows16 {
  const int16_t* const* ptrs;
  size_t m, taps, seg;
};

// out row m starts at out + m * out_stride and receives n values.
void qs8_gemm__scalar(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
void qs8_gemm__avx2(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
void qs8_gemm16__avx2(const GemmWeights& w, const GemmRows16& a, int8_t* out, size_t out_stride);
void qs8_gemm__neon(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
void qs8_gemm__neondot(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
void qs8_gemm(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
// The variant qs8_gemm() runs now, by its ISA's name (for tests: a path without a GEMM
// of its own names the one it falls back to).
const char* qs8_gemm_variant_name();

// Per-thread scratch memory of the GEMM paths, kept between calls: a fresh vector per
// call would zero-fill (and, past malloc's mmap threshold, page-fault) up to a few
// hundred KB every time. The contents are unspecified; callers overwrite what they use.
template <class T, int kSlot>
T* scratch(size_t count) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < count) buffer.resize(count);
  return buffer.data();
}

// Copies rows [m0, m0 + rows) of A into a dense buffer of row stride `stride` (>= K),
// zero-filling the padding columns: the packing step of the SIMD paths.
void gather_rows(const GemmRows& a, size_t m0, size_t rows, int8_t* dst, size_t stride);

}  // namespace edgeinf::qs8
