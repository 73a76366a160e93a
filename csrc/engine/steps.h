// The engine's steps: each one operator of the graph on fixed arena addresses, calling
// the csrc/kernels entry points. Parameters come validated from the bindings; steps do
// no checking of their own on the hot path.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "../kernels/qs8_binary/binary.h"
#include "../kernels/qs8_conv2d/conv2d.h"
#include "../kernels/qs8_dwconv2d/dwconv2d.h"
#include "../kernels/qs8_gemm/gemm.h"
#include "../kernels/qs8_pool/pool.h"
#include "../kernels/qs8_softmax/softmax.h"
#include "narrow_pointwise.h"
#include "pair_table.h"
#include "prelu.h"
#include "program.h"

namespace edgeinf::engine {

// A layer with few output rows (a network's head: 3x3 or 1x1 outputs of many channels)
// splits its output channels instead: the weights are also cut into channel tiles at
// load, each tile computed into its own [pixels][tile channels] block of a scratch buffer
// (or straight into the output when the layer has one pixel) and copied into place.
class Conv2dStep final : public Step {
 public:
  Conv2dStep(std::unique_ptr<qs8::ConvWeights> w, const qs8::ConvGeometry& g, const int8_t* in, int8_t* out);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "CONV_2D"; }

 private:
  void run_tile(size_t t) const;
  void run_narrow_rows(size_t r0, size_t r1) const;

  std::unique_ptr<qs8::ConvWeights> w_;
  std::unique_ptr<NarrowPointwise> narrow_;               // null unless the layer takes that path
  std::vector<std::unique_ptr<qs8::ConvWeights>> tiles_;  // empty unless the layer has few rows
  size_t tile_channels_ = 0;
  mutable std::vector<int8_t> scratch_;
  qs8::ConvGeometry g_;
  const int8_t* in_;
  int8_t* out_;
};

class DepthwiseConv2dStep final : public Step {
 public:
  DepthwiseConv2dStep(std::unique_ptr<qs8::DwWeights> w, const qs8::DwGeometry& g, const int8_t* in, int8_t* out)
      : w_(std::move(w)), g_(g), in_(in), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "DEPTHWISE_CONV_2D"; }

 private:
  std::unique_ptr<qs8::DwWeights> w_;
  qs8::DwGeometry g_;
  const int8_t* in_;
  int8_t* out_;
};

// A depthwise conv whose channel count is not a multiple of the SIMD block (16): run on a
// copy of the input with the channels padded by zero points to `padded` channels (the
// padding's weights are zero), then the real channels copied out. Each channel's result is
// independent of the others, so the real ones are exactly those of the unpadded layer;
// the kernels then never take their per-pixel scalar tail. The scratch is shared by all
// such steps of a program (they run one after another).
class PaddedDepthwiseConv2dStep final : public Step {
 public:
  PaddedDepthwiseConv2dStep(std::unique_ptr<qs8::DwWeights> w, const qs8::DwGeometry& padded, size_t channels,
                            int8_t zero_point, std::shared_ptr<std::vector<int8_t>> scratch, const int8_t* in,
                            int8_t* out);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "DEPTHWISE_CONV_2D"; }

 private:
  std::unique_ptr<qs8::DwWeights> w_;
  qs8::DwGeometry g_;
  size_t channels_;
  int8_t zero_point_;
  std::shared_ptr<std::vector<int8_t>> scratch_;
  const int8_t* in_;
  int8_t* out_;
};

// rows x K int8 input rows (contiguous) times the [N][K] weights.
class FullyConnectedStep final : public Step {
 public:
  FullyConnectedStep(std::unique_ptr<qs8::GemmWeights> w, size_t rows, const int8_t* in, int8_t* out);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "FULLY_CONNECTED"; }

 private:
  std::unique_ptr<qs8::GemmWeights> w_;
  std::vector<const int8_t*> rows_;
  int8_t* out_;
};

// ADD or MUL over operands broadcast to a 4-D output: strides are in elements, 0 on a
// broadcast axis. Equal shapes take the kernels' vector path.
struct Broadcast4 {
  std::array<size_t, 4> shape;
  std::array<size_t, 4> a_strides, b_strides;
  bool same_shape;
  size_t size() const { return shape[0] * shape[1] * shape[2] * shape[3]; }
};

// ADD, or SUB (`subtract`): TFLite's arithmetic (both inputs rescaled to a common scale,
// added or subtracted, the result requantized). Equal shapes of ADD take the vector kernel
// (its linear form where one is exact, fit at load);
// SUB and broadcasts, which have no vector kernel, look the result up in a table of every
// pair's result (64 KiB, built at load by the same arithmetic). The table loses to the
// vector kernel on equal shapes: its random reads miss L1 on real activations.
class AddStep final : public Step {
 public:
  AddStep(const qs8::AddParams& p, const Broadcast4& b, const int8_t* x, const int8_t* y, int8_t* out,
          bool subtract = false);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return subtract_ ? "SUB" : "ADD"; }

 private:
  qs8::AddParams p_;
  std::optional<qs8::PreparedAdd> vector_;  // equal shapes of ADD: the vector kernel's form
  std::unique_ptr<PairTable> table_;        // null where the vector kernel runs
  Broadcast4 b_;
  const int8_t *x_, *y_;
  int8_t* out_;
  bool subtract_;
};

class MulStep final : public Step {
 public:
  MulStep(const qs8::MulParams& p, const Broadcast4& b, const int8_t* x, const int8_t* y, int8_t* out)
      : p_(p), b_(b), x_(x), y_(y), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "MUL"; }

 private:
  qs8::MulParams p_;
  Broadcast4 b_;
  const int8_t *x_, *y_;
  int8_t* out_;
};

class PoolStep final : public Step {
 public:
  PoolStep(bool is_max, const qs8::PoolGeometry& g, const int8_t* in, int8_t* out)
      : is_max_(is_max), g_(g), in_(in), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return is_max_ ? "MAX_POOL_2D" : "AVERAGE_POOL_2D"; }

 private:
  bool is_max_;
  qs8::PoolGeometry g_;
  const int8_t* in_;
  int8_t* out_;
};

// out[i] = table[uint8(in[i])]: any int8/uint8 -> int8/uint8 map of one value, e.g.
// LOGISTIC, requantizing QUANTIZE, RELU, RELU6 (the table is built at load).
class LutStep final : public Step {
 public:
  LutStep(std::string op, const int8_t table[256], size_t n, const int8_t* in, int8_t* out);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return op_.c_str(); }

 private:
  std::string op_;
  int8_t table_[256];
  size_t n_;
  const int8_t* in_;
  int8_t* out_;
};

class PreluStep final : public Step {
 public:
  PreluStep(PreluParams p, size_t pixels, const int8_t* in, int8_t* out)
      : p_(std::move(p)), pixels_(pixels), in_(in), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "PRELU"; }

 private:
  PreluParams p_;
  size_t pixels_;
  const int8_t* in_;
  int8_t* out_;
};

class SoftmaxStep final : public Step {
 public:
  SoftmaxStep(const qs8::SoftmaxParams& p, size_t rows, size_t depth, const int8_t* in, int8_t* out)
      : p_(p), rows_(rows), depth_(depth), in_(in), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "SOFTMAX"; }

 private:
  qs8::SoftmaxParams p_;
  size_t rows_, depth_;
  const int8_t* in_;
  int8_t* out_;
};

// QUANTIZE (float32 -> int8) and DEQUANTIZE (int8 / uint8 -> float32) of n values by the
// affine map real = scale * (q - zero_point).
struct AffineQuantization {
  float scale;
  int32_t zero_point;
  bool is_unsigned = false;  // DEQUANTIZE from uint8
};

template <class In, class Out>
class AffineStep final : public Step {
 public:
  AffineStep(const AffineQuantization& q, size_t n, const In* in, Out* out) : q_(q), n_(n), in_(in), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return std::is_same_v<In, float> ? "QUANTIZE" : "DEQUANTIZE"; }

 private:
  AffineQuantization q_;
  size_t n_;
  const In* in_;
  Out* out_;
};

using QuantizeStep = AffineStep<float, int8_t>;
using DequantizeStep = AffineStep<int8_t, float>;
template <>
void QuantizeStep::run(ThreadPool& pool) const;
template <>
void DequantizeStep::run(ThreadPool& pool) const;

// CONCATENATION of inputs sharing the output's quantization: per outer index, each input's
// inner block in turn.
class ConcatStep final : public Step {
 public:
  struct Part {
    const uint8_t* src;
    size_t bytes;  // per outer index
  };
  ConcatStep(std::vector<Part> parts, size_t outer, uint8_t* out)
      : parts_(std::move(parts)), outer_(outer), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "CONCATENATION"; }

 private:
  std::vector<Part> parts_;
  size_t outer_;
  uint8_t* out_;
};

// PAD / PADV2 of a tensor seen as 4-D: `value` fills the border, the input is copied inside.
class PadStep final : public Step {
 public:
  PadStep(const std::array<size_t, 4>& in_shape, const std::array<size_t, 4>& before,
          const std::array<size_t, 4>& out_shape, size_t element_bytes, uint8_t value, const uint8_t* in, uint8_t* out)
      : in_shape_(in_shape),
        before_(before),
        out_shape_(out_shape),
        element_(element_bytes),
        value_(value),
        in_(in),
        out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "PAD"; }

 private:
  std::array<size_t, 4> in_shape_, before_, out_shape_;
  size_t element_;
  uint8_t value_;
  const uint8_t* in_;
  uint8_t* out_;
};

// MEAN of int8 over a contiguous block of axes, the input seen as [outer][count][inner],
// as TFLite's reference QuantizedMeanOrSum: the sum of q - zero point, requantized with a
// multiplier that has 1 / count folded in (computed by the planner), plus the output zero
// point, saturated.
class MeanStep final : public Step {
 public:
  struct Params {
    size_t outer, count, inner;
    int32_t multiplier, shift, input_zero_point, output_zero_point;
  };
  MeanStep(const Params& p, const int8_t* in, int8_t* out) : p_(p), in_(in), out_(out), sums_(p.inner) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "MEAN"; }

 private:
  Params p_;
  const int8_t* in_;
  int8_t* out_;
  mutable std::vector<int32_t> sums_;
};

// Data movement by a table made at load: output run r (run bytes) is the input's bytes
// from starts[r]. TRANSPOSE, SPLIT, STRIDED_SLICE and RESIZE_NEAREST_NEIGHBOR copy values
// without arithmetic, so each is one such table.
class GatherStep final : public Step {
 public:
  GatherStep(std::string op, std::vector<size_t> starts, size_t run, const uint8_t* in, uint8_t* out)
      : op_(std::move(op)), starts_(std::move(starts)), run_(run), in_(in), out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return op_.c_str(); }

 private:
  std::string op_;
  std::vector<size_t> starts_;
  size_t run_;
  const uint8_t* in_;
  uint8_t* out_;
};

// RESIZE_BILINEAR of int8 NHWC as TFLite's reference ResizeBilinearInteger: per output
// row and column the two source indices and the weight of the second one in 1/1024 steps
// (made at load); each output row is one bilinear_row (resize_bilinear.h).
class ResizeBilinearStep final : public Step {
 public:
  struct Axis {
    std::vector<int32_t> lower, upper, weight;  // per output index
  };
  ResizeBilinearStep(size_t batch, size_t in_h, size_t in_w, size_t channels, Axis ys, Axis xs, const int8_t* in,
                     int8_t* out)
      : batch_(batch),
        in_h_(in_h),
        in_w_(in_w),
        c_(channels),
        ys_(std::move(ys)),
        xs_(std::move(xs)),
        in_(in),
        out_(out) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "RESIZE_BILINEAR"; }

 private:
  size_t batch_, in_h_, in_w_, c_;
  Axis ys_, xs_;
  const int8_t* in_;
  int8_t* out_;
};

// A byte copy (RESHAPE between tensors the plan could not share).
class CopyStep final : public Step {
 public:
  CopyStep(const uint8_t* src, uint8_t* dst, size_t bytes) : src_(src), dst_(dst), bytes_(bytes) {}
  void run(ThreadPool& pool) const override;
  const char* name() const override { return "COPY"; }

 private:
  const uint8_t* src_;
  uint8_t* dst_;
  size_t bytes_;
};

}  // namespace edgeinf::engine
