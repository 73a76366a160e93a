// edgeinf._C int8 family: quantization parameters, quantize / dequantize, requantize
// and the prepared int8 operators (fully connected, conv2d, ...). Validation (the one
// layer of it, see quant_arrays.h), then the kernels with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <tuple>
#include <type_traits>

#include "../dispatch.h"
#include "../kernels/qs8_binary/binary.h"
#include "../kernels/qs8_conv2d/conv2d.h"
#include "../kernels/qs8_dwconv2d/dwconv2d.h"
#include "../kernels/qs8_gemm/gemm.h"
#include "../kernels/qs8_logistic/logistic.h"
#include "../kernels/qs8_pool/pool.h"
#include "../kernels/qs8_quantize/quantize.h"
#include "../kernels/qs8_requantize/requantize.h"
#include "../kernels/qs8_softmax/softmax.h"
#include "../size_math.h"
#include "bindings.h"
#include "fastcall.h"
#include "quant_arrays.h"

namespace py = pybind11;

namespace edgeinf::bindings {
namespace {

using qs8::Requantization;

std::vector<int32_t> int32_vector(const py::array& a, const char* what, size_t channels) {
  const int32_t* p = checked_data<int32_t>(a, what);
  if (a.ndim() > 1)
    throw std::invalid_argument(std::string(what) + ": expected a scalar or 1-D array, got shape " + shape_str(a));
  const size_t size = static_cast<size_t>(a.size());
  if (size == 1) return std::vector<int32_t>(channels, p[0]);
  if (size != channels) {
    throw std::invalid_argument(std::string(what) + ": expected 1 or " + std::to_string(channels) +
                                " values (one per output channel), got " + std::to_string(size));
  }
  return std::vector<int32_t>(p, p + size);
}

// A layer's requantization as the bindings take it: (multiplier, shift, output_zero_point,
// act_min, act_max), with one multiplier and shift per output channel or one for all.
using RequantizationArgs = std::tuple<py::array, py::array, int32_t, int32_t, int32_t>;

Requantization make_requantization(const RequantizationArgs& args, size_t channels) {
  const auto& [multiplier, shift, output_zero_point, act_min, act_max] = args;
  return checked_requantization(int32_vector(multiplier, "multiplier", channels),
                                int32_vector(shift, "shift", channels), output_zero_point, act_min, act_max);
}

// Spatial geometry checks shared by conv, depthwise conv and pooling.
void check_spatial(size_t out_h, size_t out_w, size_t stride_h, size_t stride_w, size_t dilation_h, size_t dilation_w,
                   ptrdiff_t pad_top, ptrdiff_t pad_left) {
  if (out_h == 0 || out_w == 0 || out_h > (1u << 20) || out_w > (1u << 20)) {
    throw std::invalid_argument("output size must be positive, got " + std::to_string(out_h) + "x" +
                                std::to_string(out_w));
  }
  if (stride_h == 0 || stride_w == 0 || dilation_h == 0 || dilation_w == 0 || stride_h > 4096 || stride_w > 4096 ||
      dilation_h > 4096 || dilation_w > 4096) {
    throw std::invalid_argument("strides and dilations must be in [1, 4096], got strides " + std::to_string(stride_h) +
                                "x" + std::to_string(stride_w) + ", dilations " + std::to_string(dilation_h) + "x" +
                                std::to_string(dilation_w));
  }
  if (pad_top < 0 || pad_left < 0 || pad_top > 65536 || pad_left > 65536) {
    throw std::invalid_argument("padding must be in [0, 65536], got top " + std::to_string(pad_top) + ", left " +
                                std::to_string(pad_left));
  }
}

// Output size and leading padding of one axis as TFLite computes them: SAME puts the odd
// extra padding after. Mirrors edgeinf.quant.conv_output_size, which the tests' oracle uses.
struct AxisGeometry {
  size_t out;
  ptrdiff_t pad_before;
};

AxisGeometry axis_geometry(size_t size, size_t filter, size_t stride, size_t dilation, bool same) {
  const size_t extent = (filter - 1) * dilation + 1;
  const size_t out =
      same ? (size + stride - 1) / stride : (size + stride >= extent ? (size + stride - extent) / stride : 0);
  if (out == 0) {
    throw std::invalid_argument("input size " + std::to_string(size) + " is smaller than the filter extent " +
                                std::to_string(extent) + " with '" + (same ? "same" : "valid") +
                                "' padding: no output");
  }
  const size_t needed = (out - 1) * stride + extent;
  return {out, static_cast<ptrdiff_t>(needed > size ? (needed - size) / 2 : 0)};
}

// A convolution layer's window as the bindings take it: (stride_h, stride_w, dilation_h,
// dilation_w, same_padding).
using SpatialArgs = std::tuple<size_t, size_t, size_t, size_t, bool>;

// The filter size (dimensions 1 and 2 of the weights), strides, dilations and padding
// mode of a convolution layer; the output geometry follows from each call's input.
struct Spatial {
  size_t k_h, k_w, stride_h, stride_w, dilation_h, dilation_w;
  bool same;

  static Spatial checked(const py::array& weights, const SpatialArgs& args) {
    const auto [stride_h, stride_w, dilation_h, dilation_w, same] = args;
    check_spatial(1, 1, stride_h, stride_w, dilation_h, dilation_w, 0, 0);
    return {static_cast<size_t>(weights.shape(1)),
            static_cast<size_t>(weights.shape(2)),
            stride_h,
            stride_w,
            dilation_h,
            dilation_w,
            same};
  }

  // Fills the fields that ConvGeometry and DwGeometry name alike with the geometry of a
  // call on NHWC `x` (checked).
  template <class Geometry>
  void fill(const py::array& x, Geometry* g) const {
    const AxisGeometry y = axis_geometry(static_cast<size_t>(x.shape(1)), k_h, stride_h, dilation_h, same);
    const AxisGeometry h = axis_geometry(static_cast<size_t>(x.shape(2)), k_w, stride_w, dilation_w, same);
    check_spatial(y.out, h.out, stride_h, stride_w, dilation_h, dilation_w, y.pad_before, h.pad_before);
    g->batch = static_cast<size_t>(x.shape(0));
    g->in_h = static_cast<size_t>(x.shape(1));
    g->in_w = static_cast<size_t>(x.shape(2));
    g->out_h = y.out;
    g->out_w = h.out;
    g->k_h = k_h;
    g->k_w = k_w;
    g->stride_h = stride_h;
    g->stride_w = stride_w;
    g->dilation_h = dilation_h;
    g->dilation_w = dilation_w;
    g->pad_top = y.pad_before;
    g->pad_left = h.pad_before;
  }
};

std::vector<py::ssize_t> nhwc(size_t b, size_t h, size_t w, size_t c) {
  return {static_cast<py::ssize_t>(b), static_cast<py::ssize_t>(h), static_cast<py::ssize_t>(w),
          static_cast<py::ssize_t>(c)};
}

std::vector<py::ssize_t> shape_of(const py::array& a) { return {a.shape(), a.shape() + a.ndim()}; }

const int32_t* optional_bias(const py::object& bias, size_t n, py::array* keep) {
  if (bias.is_none()) return nullptr;
  if (!py::isinstance<py::array>(bias)) throw std::invalid_argument("bias: expected a numpy array or None");
  *keep = py::reinterpret_borrow<py::array>(bias);
  const int32_t* b = checked_data<int32_t>(*keep, "bias");
  check_shape(*keep, "bias", {static_cast<py::ssize_t>(n)});
  return b;
}

// A fully connected layer / GEMM with prepared weights: x [..., K] -> [..., N].
class FullyConnected {
 public:
  // TFLite's reference FULLY_CONNECTED requantizes in double: `requantization` is (scale,
  // output_zero_point, act_min, act_max), `scale` holding input_scale * weight_scale /
  // output_scale per output channel (or one value).
  FullyConnected(const py::array& weights, const py::object& bias, int32_t input_zero_point,
                 const std::tuple<py::array, int32_t, int32_t, int32_t>& requantization) {
    const auto& [scale, output_zero_point, act_min, act_max] = requantization;
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights", 2);
    const size_t n = static_cast<size_t>(weights.shape(0)), k = static_cast<size_t>(weights.shape(1));
    check_weight_sizes(n, k);
    py::array keep;
    const int32_t* b = optional_bias(bias, n, &keep);
    check_int8_zero_point(input_zero_point, "input");
    const double* ps = checked_data<double>(scale, "scale");
    if (scale.ndim() > 1 || (scale.size() != 1 && static_cast<size_t>(scale.size()) != n)) {
      throw std::invalid_argument("scale: expected 1 or " + std::to_string(n) + " values, got shape " +
                                  shape_str(scale));
    }
    std::vector<double> scales(n);
    for (size_t c = 0; c < n; ++c) scales[c] = ps[scale.size() == 1 ? 0 : c];
    check_requantization_scales(scales.data(), n);
    Requantization rq = checked_requantization(std::vector<int32_t>(n, 0), std::vector<int32_t>(n, 0),
                                               output_zero_point, act_min, act_max);
    weights_ = std::make_unique<qs8::GemmWeights>(w, n, k, b, input_zero_point, std::move(rq), std::move(scales));
  }

  py::array_t<int8_t> run(const py::array& x, const py::object& out) const {
    const int8_t* px = checked_data<int8_t>(x, "x");
    const size_t k = weights_->k(), n = weights_->n();
    if (x.ndim() < 1 || static_cast<size_t>(x.shape(x.ndim() - 1)) != k) {
      throw std::invalid_argument("x: expected a last dimension of " + std::to_string(k) +
                                  " (the weights' input size), got shape " + shape_str(x));
    }
    std::vector<py::ssize_t> shape = shape_of(x);
    shape.back() = static_cast<py::ssize_t>(n);
    py::array_t<int8_t> result = output_array<int8_t>(out, shape);
    int8_t* py_out = result.mutable_data();
    const size_t m = k ? static_cast<size_t>(x.size()) / k : 0;
    if (m == 0) return result;  // zero rows in (a batch of 0), zero rows out
    {
      py::gil_scoped_release release;
      std::vector<const int8_t*> rows(m);
      for (size_t i = 0; i < m; ++i) rows[i] = px + i * k;
      qs8::GemmRows a{rows.data(), m, 1, k, k};
      qs8::qs8_gemm(*weights_, a, py_out, n);
    }
    return result;
  }

  size_t input_size() const { return weights_->k(); }
  size_t output_size() const { return weights_->n(); }

  // Whether the vector epilogue (AVX2 or NEON) requantizes with the float form (rq_params.h).
  bool float_requantization() const { return weights_->float_requantization() != nullptr; }

 private:
  std::unique_ptr<qs8::GemmWeights> weights_;
};

// What conv2d and depthwise conv2d share: the window, the output channels, the run of a
// call on NHWC input, and whether the build's vector kernels (AVX2 or NEON) requantize
// with the float form (rq_params.h), fitted at construction.
class SpatialLayer {
 public:
  bool float_requantization() const { return float_requantization_; }

 protected:
  // kernel(g, x, out) with the GIL released, on x checked as NHWC int8 of `in_c` channels
  // (`whose`: where that count comes from); g holds the layer's channel fields, the
  // window's are filled in from x.
  template <class Geometry, class Kernel>
  py::array_t<int8_t> run_nhwc(const py::array& x, const py::object& out, size_t in_c, const char* whose, Geometry g,
                               Kernel&& kernel) const {
    const int8_t* px = checked_data<int8_t>(x, "x");
    check_ndim(x, "x (NHWC)", 4);
    if (static_cast<size_t>(x.shape(3)) != in_c) {
      throw std::invalid_argument("x: expected " + std::to_string(in_c) + " channels (" + whose + "), got shape " +
                                  shape_str(x));
    }
    spatial_.fill(x, &g);
    py::array_t<int8_t> result = output_array<int8_t>(out, nhwc(g.batch, g.out_h, g.out_w, out_c_));
    int8_t* po = result.mutable_data();
    if (g.batch) {
      py::gil_scoped_release release;
      kernel(g, px, po);
    }
    return result;
  }

  Spatial spatial_{};
  size_t out_c_ = 0;
  bool float_requantization_ = false;
};

// conv2d with prepared OHWI weights; the output geometry follows from each call's input.
class Conv2d : public SpatialLayer {
 public:
  Conv2d(const py::array& weights, const py::object& bias, int32_t input_zero_point,
         const RequantizationArgs& requantization, const SpatialArgs& spatial) {
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights (OHWI)", 4);
    out_c_ = static_cast<size_t>(weights.shape(0));
    in_c_ = static_cast<size_t>(weights.shape(3));
    check_weight_sizes(out_c_, static_cast<size_t>(weights.shape(1) * weights.shape(2)) * in_c_);
    spatial_ = Spatial::checked(weights, spatial);
    check_int8_zero_point(input_zero_point, "input");
    py::array keep;
    const int32_t* b = optional_bias(bias, out_c_, &keep);
    weights_ = std::make_unique<qs8::ConvWeights>(w, out_c_, spatial_.k_h, spatial_.k_w, in_c_, b, input_zero_point,
                                                  make_requantization(requantization, out_c_));
#if defined(EDGEINF_BUILD_NEON)
    float_requantization_ = weights_->gemm().float_requantization() != nullptr;  // the direct kernels' too
#else
    float_requantization_ = weights_->avx2_direct() ? (weights_->avx2_rq_flags() & qs8::kRqFloat) != 0
                                                    : weights_->gemm().float_requantization() != nullptr;
#endif
  }

  py::array_t<int8_t> run(const py::array& x, const py::object& out) const {
    qs8::ConvGeometry g{};
    g.in_c = in_c_;
    g.out_c = out_c_;
    return run_nhwc(x, out, in_c_, "the filter's", g, [this](const qs8::ConvGeometry& g, const int8_t* in, int8_t* o) {
      qs8::qs8_conv2d(*weights_, g, in, o);
    });
  }

 private:
  size_t in_c_;
  std::unique_ptr<qs8::ConvWeights> weights_;
};

// depthwise conv2d with prepared [1, KH, KW, C * multiplier] weights.
class DepthwiseConv2d : public SpatialLayer {
 public:
  DepthwiseConv2d(const py::array& weights, const py::object& bias, size_t depth_multiplier, int32_t input_zero_point,
                  const RequantizationArgs& requantization, const SpatialArgs& spatial)
      : multiplier_(depth_multiplier) {
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights ([1, KH, KW, C])", 4);
    if (weights.shape(0) != 1)
      throw std::invalid_argument("weights: expected a first dimension of 1, got shape " + shape_str(weights));
    out_c_ = static_cast<size_t>(weights.shape(3));
    check_weight_sizes(out_c_, static_cast<size_t>(weights.shape(1) * weights.shape(2)));
    if (depth_multiplier == 0 || out_c_ % depth_multiplier != 0) {
      throw std::invalid_argument("depth multiplier " + std::to_string(depth_multiplier) + " does not divide the " +
                                  std::to_string(out_c_) + " output channels");
    }
    spatial_ = Spatial::checked(weights, spatial);
    check_int8_zero_point(input_zero_point, "input");
    py::array keep;
    const int32_t* b = optional_bias(bias, out_c_, &keep);
    weights_ = std::make_unique<qs8::DwWeights>(w, spatial_.k_h, spatial_.k_w, out_c_, b, input_zero_point,
                                                make_requantization(requantization, out_c_));
#if defined(EDGEINF_BUILD_NEON)
    float_requantization_ = weights_->neon_float_requantization() != nullptr;
#else
    float_requantization_ = (weights_->avx2_rq_flags() & qs8::kRqFloat) != 0;
#endif
  }

  py::array_t<int8_t> run(const py::array& x, const py::object& out) const {
    qs8::DwGeometry g{};
    g.in_c = out_c_ / multiplier_;
    g.depth_multiplier = multiplier_;
    return run_nhwc(
        x, out, g.in_c, "filter channels / depth multiplier", g,
        [this](const qs8::DwGeometry& g, const int8_t* in, int8_t* o) { qs8::qs8_dwconv2d(*weights_, g, in, o); });
  }

 private:
  size_t multiplier_;
  std::unique_ptr<qs8::DwWeights> weights_;
};

py::array_t<int8_t> pool(bool is_max, const py::array& x, size_t filter_h, size_t filter_w, size_t stride_h,
                         size_t stride_w, size_t out_h, size_t out_w, ptrdiff_t pad_top, ptrdiff_t pad_left,
                         int32_t act_min, int32_t act_max, const py::object& out) {
  const int8_t* px = checked_data<int8_t>(x, "x");
  check_ndim(x, "x (NHWC)", 4);
  check_spatial(out_h, out_w, stride_h, stride_w, 1, 1, pad_top, pad_left);
  if (filter_h == 0 || filter_w == 0 || filter_h > 65536 || filter_w > 65536) {
    throw std::invalid_argument("pool filter must be in [1, 65536], got " + std::to_string(filter_h) + "x" +
                                std::to_string(filter_w));
  }
  check_activation_range(act_min, act_max);
  qs8::PoolGeometry g{static_cast<size_t>(x.shape(0)),
                      static_cast<size_t>(x.shape(1)),
                      static_cast<size_t>(x.shape(2)),
                      static_cast<size_t>(x.shape(3)),
                      out_h,
                      out_w,
                      filter_h,
                      filter_w,
                      stride_h,
                      stride_w,
                      pad_top,
                      pad_left,
                      act_min,
                      act_max};
  // Every window must hold at least one input value (TFLite's AveragePool fails otherwise).
  for (size_t o = 0; o < out_h; ++o) {
    size_t s, e;
    qs8::pool_window(o, stride_h, pad_top, filter_h, g.in_h, &s, &e);
    if (s == e)
      throw std::invalid_argument("pool: output row " + std::to_string(o) + " has an empty window (padding too large)");
  }
  for (size_t o = 0; o < out_w; ++o) {
    size_t s, e;
    qs8::pool_window(o, stride_w, pad_left, filter_w, g.in_w, &s, &e);
    if (s == e)
      throw std::invalid_argument("pool: output column " + std::to_string(o) +
                                  " has an empty window (padding too large)");
  }
  py::array_t<int8_t> result = output_array<int8_t>(out, nhwc(g.batch, out_h, out_w, g.channels));
  int8_t* po = result.mutable_data();
  if (x.size() == 0) return result;  // a batch may be huge when the channels are 0: no loop over it
  py::gil_scoped_release release;
  if (is_max) {
    qs8::qs8_maxpool(g, px, po);
  } else {
    qs8::qs8_avgpool(g, px, po);
  }
  return result;
}

void check_multiplier(int32_t m, int32_t shift, int32_t min_shift, int32_t max_shift, const char* what) {
  if (m < 0 || shift < min_shift || shift > max_shift) {
    throw std::invalid_argument(std::string(what) + ": expected a multiplier >= 0 and a shift in [" +
                                std::to_string(min_shift) + ", " + std::to_string(max_shift) + "], got " +
                                std::to_string(m) + ", " + std::to_string(shift));
  }
}

void check_binary_offsets(int32_t input1_offset, int32_t input2_offset, int32_t output_zero_point) {
  check_int8_zero_point(-input1_offset, "a");
  check_int8_zero_point(-input2_offset, "b");
  check_int8_zero_point(output_zero_point, "output");
}

// ADD's parameters from the bindings' sequence, in qs8::AddParams' order, checked.
qs8::AddParams add_params(const std::array<int32_t, 12>& q) {
  const qs8::AddParams p{q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11]};
  check_binary_offsets(p.input1_offset, p.input2_offset, p.output_offset);
  if (p.left_shift < 0 || p.left_shift > 22)
    throw std::invalid_argument("left_shift must be in [0, 22], got " + std::to_string(p.left_shift));
  check_multiplier(p.input1_multiplier, p.input1_shift, -31, 0, "input 1 rescale");
  check_multiplier(p.input2_multiplier, p.input2_shift, -31, 0, "input 2 rescale");
  check_multiplier(p.output_multiplier, p.output_shift, -31, 0, "output rescale");
  check_activation_range(p.act_min, p.act_max);
  return p;
}

// ADD's parameters as add_params(), with the linear form fit to them (binary.h).
qs8::PreparedAdd prepared_add_params(const std::array<int32_t, 12>& q) { return qs8::PreparedAdd(add_params(q)); }

// MUL's parameters from the bindings' sequence, in qs8::MulParams' order, checked.
qs8::MulParams mul_params(const std::array<int32_t, 7>& q) {
  const qs8::MulParams p{q[0], q[1], q[2], q[3], q[4], q[5], q[6]};
  check_binary_offsets(p.input1_offset, p.input2_offset, p.output_offset);
  check_multiplier(p.output_multiplier, p.output_shift, -31, 14, "output rescale");
  check_activation_range(p.act_min, p.act_max);
  return p;
}

// An elementwise int8 operator of two equal-shaped inputs (the Python layer broadcasts):
// `params` is the flat sequence of its parameter struct, checked by kParams.
template <class Params, size_t kCount, Params (*kParams)(const std::array<int32_t, kCount>&),
          void (*kKernel)(const int8_t*, const int8_t*, int8_t*, size_t, const Params&)>
py::array_t<int8_t> binary(const py::array& a, const py::array& b, const std::array<int32_t, kCount>& params,
                           const py::object& out) {
  const int8_t* pa = checked_data<int8_t>(a, "a");
  const int8_t* pb = checked_data<int8_t>(b, "b");
  if (a.ndim() != b.ndim() || !std::equal(a.shape(), a.shape() + a.ndim(), b.shape())) {
    throw std::invalid_argument("a and b: expected equal shapes, got " + shape_str(a) + " and " + shape_str(b));
  }
  const Params p = kParams(params);
  py::array_t<int8_t> result = output_array<int8_t>(out, shape_of(a));
  int8_t* po = result.mutable_data();
  const size_t n = static_cast<size_t>(a.size());
  py::gil_scoped_release release;
  kKernel(pa, pb, po, n, p);
  return result;
}

// quantize (float -> int8) or dequantize (int8 -> float) of x viewed as [outer, channels,
// inner], with channel c's scale and zero point.
template <class In, class Out, void (*kConvert)(const In*, Out*, size_t, float, int32_t)>
py::array_t<Out> convert_per_channel(const py::array& x, const py::array& scales, const py::array& zero_points,
                                     size_t outer, size_t inner, const py::object& out) {
  constexpr bool kQuantize = std::is_same_v<Out, int8_t>;
  const char* what = kQuantize ? "quantize" : "dequantize";
  const char* name = kQuantize ? "x" : "q";
  const In* px = checked_data<In>(x, name);
  const float* ps = checked_data<float>(scales, "scales");
  const int32_t* pz = checked_data<int32_t>(zero_points, "zero_points");
  const size_t channels = static_cast<size_t>(scales.size());
  if (static_cast<size_t>(zero_points.size()) != channels ||
      product_size({outer, channels, inner}, "outer x channels x inner") != static_cast<size_t>(x.size())) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(channels) + " scales and " +
                                std::to_string(zero_points.size()) + " zero points do not match " + name +
                                " of shape " + shape_str(x));
  }
  for (size_t c = 0; c < channels; ++c) {
    check_scale(ps[c], what);
    check_int8_zero_point(pz[c], what);
  }
  py::array_t<Out> result = output_array<Out>(out, shape_of(x));
  Out* po = result.mutable_data();
  if (x.size() == 0) return result;  // outer may be huge when inner is 0: no loop over it
  py::gil_scoped_release release;
  for (size_t o = 0; o < outer; ++o) {
    for (size_t c = 0; c < channels; ++c) {
      const size_t off = (o * channels + c) * inner;
      kConvert(px + off, po + off, inner, ps[c], pz[c]);
    }
  }
  return result;
}

// Capsule names of the prepared layers, for _run_layer (compared by address: the capsule
// keeps the pointer it was given).
constexpr const char* kFullyConnectedCapsule = "edgeinf.Qs8FullyConnected";
constexpr const char* kConv2dCapsule = "edgeinf.Qs8Conv2d";
constexpr const char* kDepthwiseCapsule = "edgeinf.Qs8DepthwiseConv2d";

// _run_layer(capsule, x[, out]): a prepared layer's run() through CPython's METH_FASTCALL
// convention instead of pybind11's dispatcher (a bare 2x2x16 depthwise call: 517 against
// 779 ns warm; cold, the dispatcher's code costs several microseconds more, see
// preprocess.cc). The capsule comes from the layer's _capsule() and keeps the layer alive.
// Errors are those of run(): TypeError for an x that is not an array, InputError for a
// wrong one.
PyObject* run_layer_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 && nargs != 3) {
    PyErr_Format(PyExc_TypeError, "_run_layer expects (layer capsule, x[, out]), got %zd arguments", nargs);
    return nullptr;
  }
  const char* name = PyCapsule_GetName(args[0]);
  if (name == nullptr && PyErr_Occurred()) return nullptr;
  void* layer = PyCapsule_GetPointer(args[0], name);
  if (layer == nullptr) return nullptr;
  if (!py::isinstance<py::array>(args[1])) {
    PyErr_Format(PyExc_TypeError, "x must be a numpy array, got %s", Py_TYPE(args[1])->tp_name);
    return nullptr;
  }
  return call_translating([&]() -> PyObject* {
    const auto x = py::reinterpret_borrow<py::array>(args[1]);
    const auto out = nargs == 3 ? py::reinterpret_borrow<py::object>(args[2]) : py::none();
    if (name == kFullyConnectedCapsule) return static_cast<FullyConnected*>(layer)->run(x, out).release().ptr();
    if (name == kConv2dCapsule) return static_cast<Conv2d*>(layer)->run(x, out).release().ptr();
    if (name == kDepthwiseCapsule) return static_cast<DepthwiseConv2d*>(layer)->run(x, out).release().ptr();
    PyErr_Format(PyExc_ValueError, "_run_layer: a capsule named '%s' is not a prepared layer", name ? name : "");
    return nullptr;
  });
}

PyMethodDef run_layer_def = {"_run_layer", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&run_layer_fast)),
                             METH_FASTCALL, "A prepared layer's run(x, out) by its _capsule() (the per-call path)."};

}  // namespace

void bind_quant(py::module_& m) {
  add_fastcall(m, run_layer_def);

  m.def(
      "quantize_multiplier",
      [](double real) {
        if (!(real >= 0.0) || !std::isfinite(real)) {
          throw std::invalid_argument("real multiplier must be finite and >= 0, got " + std::to_string(real));
        }
        const qs8::QuantizedMultiplier q = qs8::quantize_multiplier(real);
        return py::make_tuple(q.multiplier, q.shift);
      },
      py::arg("real_multiplier"));

  m.def(
      "multiply_by_quantized_multiplier",
      [](const py::array& x, int32_t multiplier, int shift) {
        const int32_t* px = checked_data<int32_t>(x, "x");
        if (shift < -31 || shift > 30)
          throw std::invalid_argument("shift must be in [-31, 30], got " + std::to_string(shift));
        py::array_t<int32_t> out(shape_of(x));
        int32_t* po = out.mutable_data();
        const size_t size = static_cast<size_t>(x.size());
        py::gil_scoped_release release;
        for (size_t i = 0; i < size; ++i) po[i] = qs8::multiply_by_quantized_multiplier(px[i], multiplier, shift);
        return out;
      },
      py::arg("x"), py::arg("multiplier"), py::arg("shift"));

  m.def(
      "activation_range",
      [](int act, float scale, int32_t zero_point) {
        if (act < 0 || act > 3) throw std::invalid_argument("activation code must be 0..3, got " + std::to_string(act));
        check_scale(scale, "output");
        check_int8_zero_point(zero_point, "output");
        int32_t lo, hi;
        qs8::activation_range(static_cast<qs8::Activation>(act), scale, zero_point, &lo, &hi);
        return py::make_tuple(lo, hi);
      },
      py::arg("activation"), py::arg("scale"), py::arg("zero_point"));

  m.def(
      "requantize",
      [](const py::array& acc, const py::array& multiplier, const py::array& shift, int32_t zero_point, int32_t act_min,
         int32_t act_max, const py::object& out) {
        const int32_t* pa = checked_data<int32_t>(acc, "acc");
        if (acc.ndim() < 1) throw std::invalid_argument("acc: expected at least 1 dimension, got a scalar");
        const size_t channels = static_cast<size_t>(acc.shape(acc.ndim() - 1));
        const size_t rows = channels ? static_cast<size_t>(acc.size()) / channels : 0;
        Requantization rq = make_requantization({multiplier, shift, zero_point, act_min, act_max}, channels);
        py::array_t<int8_t> result = output_array<int8_t>(out, shape_of(acc));
        int8_t* po = result.mutable_data();
        py::gil_scoped_release release;
        qs8::qs8_requantize(pa, po, rows, channels, rq);
        return result;
      },
      py::arg("acc"), py::arg("multiplier"), py::arg("shift"), py::arg("zero_point"), py::arg("act_min") = -128,
      py::arg("act_max") = 127, py::arg("out") = py::none());

  // Per-channel variants pass `scales`/`zero_points` with one entry per index of the
  // middle axis of an array viewed as [outer, channels, inner].
  m.def("quantize", &convert_per_channel<float, int8_t, qs8::qs8_quantize>, py::arg("x"), py::arg("scales"),
        py::arg("zero_points"), py::arg("outer"), py::arg("inner"), py::arg("out") = py::none());
  m.def("dequantize", &convert_per_channel<int8_t, float, qs8::qs8_dequantize>, py::arg("q"), py::arg("scales"),
        py::arg("zero_points"), py::arg("outer"), py::arg("inner"), py::arg("out") = py::none());

  py::class_<FullyConnected>(m, "Qs8FullyConnected")
      .def(py::init<const py::array&, const py::object&, int32_t,
                    const std::tuple<py::array, int32_t, int32_t, int32_t>&>(),
           py::arg("weights"), py::arg("bias"), py::arg("input_zero_point"), py::arg("requantization"))
      .def("run", &FullyConnected::run, py::arg("x"), py::arg("out") = py::none())
      .def("_capsule",
           [](const py::object& self) {
             return owner_capsule(self, self.cast<const FullyConnected&>(), kFullyConnectedCapsule);
           })
      .def_property_readonly("input_size", &FullyConnected::input_size)
      .def_property_readonly("output_size", &FullyConnected::output_size)
      .def_property_readonly("_float_requantization", &FullyConnected::float_requantization);

  py::class_<Conv2d>(m, "Qs8Conv2d")
      .def(py::init<const py::array&, const py::object&, int32_t, const RequantizationArgs&, const SpatialArgs&>(),
           py::arg("weights"), py::arg("bias"), py::arg("input_zero_point"), py::arg("requantization"),
           py::arg("spatial"))
      .def("run", &Conv2d::run, py::arg("x"), py::arg("out") = py::none())
      .def("_capsule",
           [](const py::object& self) { return owner_capsule(self, self.cast<const Conv2d&>(), kConv2dCapsule); })
      .def_property_readonly("_float_requantization", &Conv2d::float_requantization);

  py::class_<DepthwiseConv2d>(m, "Qs8DepthwiseConv2d")
      .def(py::init<const py::array&, const py::object&, size_t, int32_t, const RequantizationArgs&,
                    const SpatialArgs&>(),
           py::arg("weights"), py::arg("bias"), py::arg("depth_multiplier"), py::arg("input_zero_point"),
           py::arg("requantization"), py::arg("spatial"))
      .def("run", &DepthwiseConv2d::run, py::arg("x"), py::arg("out") = py::none())
      .def("_capsule",
           [](const py::object& self) {
             return owner_capsule(self, self.cast<const DepthwiseConv2d&>(), kDepthwiseCapsule);
           })
      .def_property_readonly("_float_requantization", &DepthwiseConv2d::float_requantization);

  m.def("pool", &pool, py::arg("is_max"), py::arg("x"), py::arg("filter_h"), py::arg("filter_w"), py::arg("stride_h"),
        py::arg("stride_w"), py::arg("out_h"), py::arg("out_w"), py::arg("pad_top"), py::arg("pad_left"),
        py::arg("act_min") = -128, py::arg("act_max") = 127, py::arg("out") = py::none());

  // add and mul take their parameter structs (qs8::AddParams, qs8::MulParams) as flat sequences.
  m.def("add", &binary<qs8::AddParams, 12, add_params, qs8::qs8_add>, py::arg("a"), py::arg("b"), py::arg("params"),
        py::arg("out") = py::none());
  // ADD through its linear form where one is exact (as the engine runs it), and that form:
  // (x_coefficient, y_coefficient, bias, shift, int16_step), int16_step -1 for the int32 form.
  m.def("add_prepared", &binary<qs8::PreparedAdd, 12, prepared_add_params, qs8::qs8_add_prepared>, py::arg("a"),
        py::arg("b"), py::arg("params"), py::arg("out") = py::none());
  m.def(
      "add_linear_form",
      [](const std::array<int32_t, 12>& params) -> py::object {
        const std::optional<qs8::AddLinear> f = qs8::fit_add_linear(add_params(params));
        if (!f) return py::none();
        return py::make_tuple(f->x_coefficient, f->y_coefficient, f->bias, f->shift, f->int16_step);
      },
      py::arg("params"));
  m.def("mul", &binary<qs8::MulParams, 7, mul_params, qs8::qs8_mul>, py::arg("a"), py::arg("b"), py::arg("params"),
        py::arg("out") = py::none());

  m.def(
      "softmax",
      [](const py::array& x, float input_scale, float beta, const py::object& out) {
        const int8_t* px = checked_data<int8_t>(x, "x");
        if (x.ndim() < 1 || x.shape(x.ndim() - 1) == 0)
          throw std::invalid_argument("x: expected a non-empty last axis, got shape " + shape_str(x));
        check_scale(input_scale, "input");
        if (!(beta > 0.0f) || !std::isfinite(beta))
          throw std::invalid_argument("beta must be positive and finite, got " + std::to_string(beta));
        const qs8::SoftmaxParams p = qs8::softmax_params(input_scale, beta);
        const size_t depth = static_cast<size_t>(x.shape(x.ndim() - 1)), rows = static_cast<size_t>(x.size()) / depth;
        py::array_t<int8_t> result = output_array<int8_t>(out, shape_of(x));
        int8_t* po = result.mutable_data();
        py::gil_scoped_release release;
        qs8::qs8_softmax(px, po, rows, depth, p);
        return result;
      },
      py::arg("x"), py::arg("input_scale"), py::arg("beta") = 1.0f, py::arg("out") = py::none());

  m.def(
      "softmax_params",
      [](float input_scale, float beta) {
        check_scale(input_scale, "input");
        const qs8::SoftmaxParams p = qs8::softmax_params(input_scale, beta);
        return py::make_tuple(p.input_multiplier, p.input_left_shift, p.diff_min);
      },
      py::arg("input_scale"), py::arg("beta") = 1.0f);

  m.def(
      "logistic",
      [](const py::array& x, float input_scale, int32_t input_zero_point, const py::object& out) {
        const int8_t* px = checked_data<int8_t>(x, "x");
        check_scale(input_scale, "input");
        check_int8_zero_point(input_zero_point, "input");
        py::array_t<int8_t> result = output_array<int8_t>(out, shape_of(x));
        int8_t* po = result.mutable_data();
        const size_t n = static_cast<size_t>(x.size());
        py::gil_scoped_release release;
        int8_t table[256];
        qs8::logistic_table(input_scale, input_zero_point, table);
        qs8::qs8_lut(px, po, n, table);
        return result;
      },
      py::arg("x"), py::arg("input_scale"), py::arg("input_zero_point"), py::arg("out") = py::none());
}

}  // namespace edgeinf::bindings
