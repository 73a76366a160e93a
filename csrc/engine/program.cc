#include "program.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "../kernels/qs8_logistic/logistic.h"
#include "../kernels/qs8_quantize/quantize.h"
#include "steps.h"

namespace edgeinf::engine {

void Program::FreeAligned::operator()(uint8_t* p) const { std::free(p); }

Program::Program(size_t arena_bytes) : arena_bytes_(arena_bytes) {
  if (arena_bytes > kMaxArenaBytes) {
    throw std::invalid_argument("engine arena of " + std::to_string(arena_bytes) + " bytes exceeds the limit of " +
                                std::to_string(kMaxArenaBytes));
  }
  const size_t rounded = (arena_bytes + kAlignment - 1) / kAlignment * kAlignment + kAlignment;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  arena_.reset(p);
}

uint8_t* Program::span(size_t offset, size_t bytes, const char* what) {
  if (offset > arena_bytes_ || bytes > arena_bytes_ - offset) {
    throw std::invalid_argument(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                                std::to_string(offset + bytes) + ") lie outside the arena of " +
                                std::to_string(arena_bytes_) + " bytes");
  }
  return arena_.get() + offset;
}

void Program::run() const {
  for (const auto& step : steps_) step->run();
}

// ---------------------------------------------------------------- steps

void Conv2dStep::run() const { qs8::qs8_conv2d(*w_, g_, in_, out_); }

void DepthwiseConv2dStep::run() const { qs8::qs8_dwconv2d(*w_, g_, in_, out_); }

PaddedDepthwiseConv2dStep::PaddedDepthwiseConv2dStep(std::unique_ptr<qs8::DwWeights> w, const qs8::DwGeometry& padded,
                                                     size_t channels, int8_t zero_point,
                                                     std::shared_ptr<std::vector<int8_t>> scratch, const int8_t* in,
                                                     int8_t* out)
    : w_(std::move(w)), g_(padded), channels_(channels), zero_point_(zero_point), scratch_(std::move(scratch)),
      in_(in), out_(out) {
  const size_t in_bytes = g_.batch * g_.in_h * g_.in_w * g_.in_c;
  const size_t out_bytes = g_.batch * g_.out_h * g_.out_w * g_.in_c;
  if (scratch_->size() < in_bytes + out_bytes) scratch_->resize(in_bytes + out_bytes);
}

void PaddedDepthwiseConv2dStep::run() const {
  const size_t cp = g_.in_c, c = channels_;
  const size_t in_pixels = g_.batch * g_.in_h * g_.in_w, out_pixels = g_.batch * g_.out_h * g_.out_w;
  int8_t* padded_in = scratch_->data();
  int8_t* padded_out = padded_in + in_pixels * cp;
  for (size_t p = 0; p < in_pixels; ++p) {
    std::memcpy(padded_in + p * cp, in_ + p * c, c);
    std::memset(padded_in + p * cp + c, zero_point_, cp - c);
  }
  qs8::qs8_dwconv2d(*w_, g_, padded_in, padded_out);
  for (size_t p = 0; p < out_pixels; ++p) std::memcpy(out_ + p * c, padded_out + p * cp, c);
}

FullyConnectedStep::FullyConnectedStep(std::unique_ptr<qs8::GemmWeights> w, size_t rows, const int8_t* in, int8_t* out)
    : w_(std::move(w)), rows_(rows), out_(out) {
  for (size_t r = 0; r < rows; ++r) rows_[r] = in + r * w_->k();
}

void FullyConnectedStep::run() const {
  const qs8::GemmRows a{rows_.data(), rows_.size(), 1, w_->k()};
  qs8::qs8_gemm(*w_, a, out_, w_->n());
}

namespace {

// out[i0][i1][i2][i3] = f(x at the broadcast index, y at the broadcast index).
template <class F>
void broadcast_apply(const Broadcast4& b, const int8_t* x, const int8_t* y, int8_t* out, F f) {
  const auto& s = b.shape;
  const auto& sa = b.a_strides;
  const auto& sb = b.b_strides;
  for (size_t i0 = 0; i0 < s[0]; ++i0) {
    for (size_t i1 = 0; i1 < s[1]; ++i1) {
      for (size_t i2 = 0; i2 < s[2]; ++i2) {
        const int8_t* xa = x + i0 * sa[0] + i1 * sa[1] + i2 * sa[2];
        const int8_t* yb = y + i0 * sb[0] + i1 * sb[1] + i2 * sb[2];
        for (size_t i3 = 0; i3 < s[3]; ++i3) *out++ = f(xa[i3 * sa[3]], yb[i3 * sb[3]]);
      }
    }
  }
}

}  // namespace

void AddStep::run() const {
  if (b_.same_shape) {
    qs8::qs8_add(x_, y_, out_, b_.size(), p_);
  } else {
    broadcast_apply(b_, x_, y_, out_, [this](int8_t a, int8_t b) { return qs8::add_one(a, b, p_); });
  }
}

void MulStep::run() const {
  if (b_.same_shape) {
    qs8::qs8_mul(x_, y_, out_, b_.size(), p_);
  } else {
    broadcast_apply(b_, x_, y_, out_, [this](int8_t a, int8_t b) { return qs8::mul_one(a, b, p_); });
  }
}

void PoolStep::run() const {
  if (is_max_) {
    qs8::qs8_maxpool(g_, in_, out_);
  } else {
    qs8::qs8_avgpool(g_, in_, out_);
  }
}

LutStep::LutStep(std::string op, const int8_t table[256], size_t n, const int8_t* in, int8_t* out)
    : op_(std::move(op)), n_(n), in_(in), out_(out) {
  std::memcpy(table_, table, sizeof(table_));
}

void LutStep::run() const { qs8::qs8_lut(in_, out_, n_, table_); }

void ChannelLutStep::run() const {
  const auto* in = reinterpret_cast<const uint8_t*>(in_);
  for (size_t i = 0; i < n_; i += channels_) {
    const int8_t* table = tables_.data();
    for (size_t c = 0; c < channels_; ++c, table += 256) out_[i + c] = table[in[i + c]];
  }
}

void SoftmaxStep::run() const { qs8::qs8_softmax(in_, out_, rows_, depth_, p_); }

void QuantizeStep::run() const { qs8::qs8_quantize(in_, out_, n_, scale_, zero_point_); }

void DequantizeStep::run() const {
  if (!unsigned_) {
    qs8::qs8_dequantize(in_, out_, n_, scale_, zero_point_);
    return;
  }
  const auto* in = reinterpret_cast<const uint8_t*>(in_);
  for (size_t i = 0; i < n_; ++i) out_[i] = scale_ * static_cast<float>(static_cast<int32_t>(in[i]) - zero_point_);
}

void ConcatStep::run() const {
  uint8_t* dst = out_;
  for (size_t o = 0; o < outer_; ++o) {
    for (const Part& part : parts_) {
      std::memcpy(dst, part.src + o * part.bytes, part.bytes);
      dst += part.bytes;
    }
  }
}

void PadStep::run() const {
  const auto& is = in_shape_;
  const auto& os = out_shape_;
  std::memset(out_, value_, os[0] * os[1] * os[2] * os[3] * element_);
  const size_t row = is[3] * element_;
  const uint8_t* src = in_;
  for (size_t i0 = 0; i0 < is[0]; ++i0) {
    for (size_t i1 = 0; i1 < is[1]; ++i1) {
      for (size_t i2 = 0; i2 < is[2]; ++i2) {
        const size_t at = (((i0 + before_[0]) * os[1] + i1 + before_[1]) * os[2] + i2 + before_[2]) * os[3] + before_[3];
        std::memcpy(out_ + at * element_, src, row);
        src += row;
      }
    }
  }
}

void MeanStep::run() const {
  const auto n = static_cast<int32_t>(p_.count);
  for (size_t o = 0; o < p_.outer; ++o) {
    std::fill(sums_.begin(), sums_.end(), 0);
    const int8_t* src = in_ + o * p_.count * p_.inner;
    for (size_t r = 0; r < p_.count; ++r, src += p_.inner) {
      for (size_t i = 0; i < p_.inner; ++i) sums_[i] += src[i];
    }
    int8_t* dst = out_ + o * p_.inner;
    for (size_t i = 0; i < p_.inner; ++i) {
      const int32_t shifted = sums_[i] - p_.input_zero_point * n;
      int32_t acc = qs8::multiply_by_quantized_multiplier(shifted, p_.multiplier, p_.shift) + p_.output_zero_point;
      acc = std::min(127, std::max(-128, acc));
      dst[i] = static_cast<int8_t>(acc);
    }
  }
}

void CopyStep::run() const { std::memmove(dst_, src_, bytes_); }

}  // namespace edgeinf::engine
