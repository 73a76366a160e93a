// edgeinf._C engine family: the Program that runs a whole planned int8 graph
// (csrc/engine). Building it is a sequence of add_* calls at load time, each validated
// here (every arena span is checked to lie inside the arena); run() executes every step
// with the GIL released. The planner in edgeinf/engine/ decides offsets and parameters.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../engine/program.h"
#include "../engine/steps.h"
#include "../engine/table_step.h"
#include "../kernels/qs8_softmax/softmax.h"
#include "bindings.h"
#include "quant_arrays.h"

namespace py = pybind11;

namespace edgeinf::bindings {
namespace {

using engine::Program;
using qs8::Requantization;
using Size4 = std::array<size_t, 4>;

constexpr size_t kMaxElements = size_t{1} << 32;

// a * b, refusing products beyond kMaxElements (sizes come from a model file).
size_t mul_bounded(size_t a, size_t b, const char* what) {
  if (a != 0 && b > kMaxElements / a) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                                " elements is more than the engine takes");
  }
  return a * b;
}

size_t product(const Size4& s, const char* what) {
  size_t n = 1;
  for (size_t d : s) n = mul_bounded(n, d, what);
  return n;
}

std::vector<int32_t> int32_channels(const py::array& a, const char* what, size_t channels) {
  const int32_t* p = checked_data<int32_t>(a, what);
  if (a.ndim() != 1 || static_cast<size_t>(a.size()) != channels) {
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(channels) + " values, got shape " +
                                shape_str(a));
  }
  return std::vector<int32_t>(p, p + channels);
}

const int32_t* optional_bias(const py::object& bias, size_t n) {
  if (bias.is_none()) return nullptr;
  const auto arr = py::reinterpret_borrow<py::array>(bias);
  const int32_t* b = checked_data<int32_t>(arr, "bias");
  check_shape(arr, "bias", {static_cast<py::ssize_t>(n)});
  return b;
}

void check_positive(std::initializer_list<size_t> values, const char* what) {
  for (size_t v : values) {
    if (v == 0 || v > (size_t{1} << 24)) {
      throw std::invalid_argument(std::string(what) + ": expected sizes in [1, 2^24], got " + std::to_string(v));
    }
  }
}

void check_padding(ptrdiff_t top, ptrdiff_t left) {
  if (top < 0 || left < 0 || top > 65536 || left > 65536) {
    throw std::invalid_argument("padding must be in [0, 65536], got top " + std::to_string(top) + ", left " +
                                std::to_string(left));
  }
}

// Convolution geometry: (batch, in_h, in_w, in_c, out_h, out_w, stride_h, stride_w,
// dilation_h, dilation_w, pad_top, pad_left).
using ConvTuple = std::array<int64_t, 12>;

struct Spatial {
  size_t batch, in_h, in_w, in_c, out_h, out_w, stride_h, stride_w, dilation_h, dilation_w;
  ptrdiff_t pad_top, pad_left;
};

Spatial spatial(const ConvTuple& t) {
  for (int64_t v : t) {
    if (v < 0) throw std::invalid_argument("geometry values must be >= 0, got " + std::to_string(v));
  }
  Spatial s{static_cast<size_t>(t[0]), static_cast<size_t>(t[1]),     static_cast<size_t>(t[2]),
            static_cast<size_t>(t[3]), static_cast<size_t>(t[4]),     static_cast<size_t>(t[5]),
            static_cast<size_t>(t[6]), static_cast<size_t>(t[7]),     static_cast<size_t>(t[8]),
            static_cast<size_t>(t[9]), static_cast<ptrdiff_t>(t[10]), static_cast<ptrdiff_t>(t[11])};
  check_positive({s.batch, s.in_h, s.in_w, s.in_c, s.out_h, s.out_w}, "tensor sizes");
  check_positive({s.stride_h, s.stride_w, s.dilation_h, s.dilation_w}, "strides and dilations");
  check_padding(s.pad_top, s.pad_left);
  return s;
}

size_t nhwc_bytes(size_t b, size_t h, size_t w, size_t c, const char* what) {
  return mul_bounded(mul_bounded(mul_bounded(b, h, what), w, what), c, what);
}

// A Program as Python sees it: the arena views keep it alive through their base.
class PyProgram {
 public:
  PyProgram(size_t arena_bytes, size_t threads) : program_(arena_bytes, threads) {}

  py::array view(py::object self, size_t offset, const std::vector<py::ssize_t>& shape, const py::dtype& dtype) {
    size_t count = 1;
    for (py::ssize_t d : shape) {
      if (d < 0) throw std::invalid_argument("view: negative dimension " + std::to_string(d));
      count = mul_bounded(count, static_cast<size_t>(d), "view");
    }
    uint8_t* p = program_.span(offset, mul_bounded(count, static_cast<size_t>(dtype.itemsize()), "view"), "view");
    return py::array(dtype, shape, {}, p, self);
  }

  void write(size_t offset, const py::array& data) {
    if (!(data.flags() & py::array::c_style)) throw std::invalid_argument("write: expected a C-contiguous array");
    uint8_t* p = program_.span(offset, static_cast<size_t>(data.nbytes()), "write");
    std::memcpy(p, data.data(), static_cast<size_t>(data.nbytes()));
  }

  void conv2d(size_t in_offset, size_t out_offset, const py::array& weights, const py::object& bias,
              int32_t input_zero_point, const py::array& multiplier, const py::array& shift, int32_t output_zero_point,
              int32_t act_min, int32_t act_max, const ConvTuple& geometry) {
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights (OHWI)", 4);
    const Spatial s = spatial(geometry);
    const size_t out_c = static_cast<size_t>(weights.shape(0)), k_h = static_cast<size_t>(weights.shape(1)),
                 k_w = static_cast<size_t>(weights.shape(2));
    check_positive({out_c, k_h, k_w}, "filter sizes");
    if (static_cast<size_t>(weights.shape(3)) != s.in_c) {
      throw std::invalid_argument("conv2d: filter has " + std::to_string(weights.shape(3)) + " input channels, input " +
                                  std::to_string(s.in_c));
    }
    check_int8_zero_point(input_zero_point, "input");
    check_activation_range(act_min, act_max);
    const int8_t* in = reinterpret_cast<const int8_t*>(
        program_.span(in_offset, nhwc_bytes(s.batch, s.in_h, s.in_w, s.in_c, "conv2d input"), "conv2d input"));
    int8_t* out = reinterpret_cast<int8_t*>(
        program_.span(out_offset, nhwc_bytes(s.batch, s.out_h, s.out_w, out_c, "conv2d output"), "conv2d output"));
    Requantization rq =
        checked_requantization(int32_channels(multiplier, "multiplier", out_c), int32_channels(shift, "shift", out_c),
                               output_zero_point, act_min, act_max);
    auto cw = std::make_unique<qs8::ConvWeights>(w, out_c, k_h, k_w, s.in_c, optional_bias(bias, out_c),
                                                 input_zero_point, std::move(rq));
    const qs8::ConvGeometry g{s.batch, s.in_h,     s.in_w,     s.in_c,       s.out_h,      s.out_w,   out_c,     k_h,
                              k_w,     s.stride_h, s.stride_w, s.dilation_h, s.dilation_w, s.pad_top, s.pad_left};
    program_.add(std::make_unique<engine::Conv2dStep>(std::move(cw), g, in, out));
  }

  void depthwise_conv2d(size_t in_offset, size_t out_offset, const py::array& weights, const py::object& bias,
                        size_t depth_multiplier, int32_t input_zero_point, const py::array& multiplier,
                        const py::array& shift, int32_t output_zero_point, int32_t act_min, int32_t act_max,
                        const ConvTuple& geometry) {
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights ([1, KH, KW, C])", 4);
    const Spatial s = spatial(geometry);
    const size_t k_h = static_cast<size_t>(weights.shape(1)), k_w = static_cast<size_t>(weights.shape(2)),
                 out_c = static_cast<size_t>(weights.shape(3));
    check_positive({k_h, k_w, out_c, depth_multiplier}, "filter sizes");
    if (weights.shape(0) != 1 || out_c != mul_bounded(s.in_c, depth_multiplier, "depthwise channels")) {
      throw std::invalid_argument("depthwise_conv2d: filter of shape " + shape_str(weights) + " does not match " +
                                  std::to_string(s.in_c) + " input channels times multiplier " +
                                  std::to_string(depth_multiplier));
    }
    check_int8_zero_point(input_zero_point, "input");
    check_activation_range(act_min, act_max);
    const int8_t* in = reinterpret_cast<const int8_t*>(
        program_.span(in_offset, nhwc_bytes(s.batch, s.in_h, s.in_w, s.in_c, "depthwise input"), "depthwise input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(
        out_offset, nhwc_bytes(s.batch, s.out_h, s.out_w, out_c, "depthwise output"), "depthwise output"));
    Requantization rq =
        checked_requantization(int32_channels(multiplier, "multiplier", out_c), int32_channels(shift, "shift", out_c),
                               output_zero_point, act_min, act_max);
    auto dw = std::make_unique<qs8::DwWeights>(w, k_h, k_w, out_c, optional_bias(bias, out_c), input_zero_point,
                                               std::move(rq));
    const qs8::DwGeometry g{s.batch, s.in_h,     s.in_w,     s.in_c,       depth_multiplier, s.out_h,   s.out_w,   k_h,
                            k_w,     s.stride_h, s.stride_w, s.dilation_h, s.dilation_w,     s.pad_top, s.pad_left};
    program_.add(std::make_unique<engine::DepthwiseConv2dStep>(std::move(dw), g, in, out));
  }

  // The same layer run with its channels padded to `padded_channels` (a multiple of the
  // SIMD block): weights, bias and requantization are given for the padded channels.
  void depthwise_conv2d_padded(size_t in_offset, size_t out_offset, size_t padded_channels, const py::array& weights,
                               const py::object& bias, int32_t input_zero_point, const py::array& multiplier,
                               const py::array& shift, int32_t output_zero_point, int32_t act_min, int32_t act_max,
                               const ConvTuple& geometry) {
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights ([1, KH, KW, C])", 4);
    const Spatial s = spatial(geometry);
    const size_t k_h = static_cast<size_t>(weights.shape(1)), k_w = static_cast<size_t>(weights.shape(2));
    check_positive({k_h, k_w, padded_channels}, "filter sizes");
    if (weights.shape(0) != 1 || static_cast<size_t>(weights.shape(3)) != padded_channels || padded_channels < s.in_c ||
        padded_channels > s.in_c + 64) {
      throw std::invalid_argument("depthwise_conv2d_padded: filter of shape " + shape_str(weights) + " for " +
                                  std::to_string(s.in_c) + " channels padded to " + std::to_string(padded_channels));
    }
    check_int8_zero_point(input_zero_point, "input");
    check_activation_range(act_min, act_max);
    const int8_t* in = reinterpret_cast<const int8_t*>(
        program_.span(in_offset, nhwc_bytes(s.batch, s.in_h, s.in_w, s.in_c, "depthwise input"), "depthwise input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(
        out_offset, nhwc_bytes(s.batch, s.out_h, s.out_w, s.in_c, "depthwise output"), "depthwise output"));
    nhwc_bytes(s.batch, s.in_h, s.in_w, padded_channels, "padded depthwise input");
    nhwc_bytes(s.batch, s.out_h, s.out_w, padded_channels, "padded depthwise output");
    Requantization rq =
        checked_requantization(int32_channels(multiplier, "multiplier", padded_channels),
                               int32_channels(shift, "shift", padded_channels), output_zero_point, act_min, act_max);
    auto dw = std::make_unique<qs8::DwWeights>(w, k_h, k_w, padded_channels, optional_bias(bias, padded_channels),
                                               input_zero_point, std::move(rq));
    const qs8::DwGeometry g{s.batch,      s.in_h,    s.in_w,    padded_channels, 1,          s.out_h,
                            s.out_w,      k_h,       k_w,       s.stride_h,      s.stride_w, s.dilation_h,
                            s.dilation_w, s.pad_top, s.pad_left};
    program_.add(std::make_unique<engine::PaddedDepthwiseConv2dStep>(
        std::move(dw), g, s.in_c, static_cast<int8_t>(input_zero_point), scratch_, in, out));
  }

  void fully_connected(size_t in_offset, size_t out_offset, size_t rows, const py::array& weights,
                       const py::object& bias, int32_t input_zero_point, const py::array& scale,
                       int32_t output_zero_point, int32_t act_min, int32_t act_max) {
    const int8_t* w = checked_data<int8_t>(weights, "weights");
    check_ndim(weights, "weights ([N, K])", 2);
    const size_t n = static_cast<size_t>(weights.shape(0)), k = static_cast<size_t>(weights.shape(1));
    check_positive({rows, n, k}, "fully connected sizes");
    check_int8_zero_point(input_zero_point, "input");
    check_int8_zero_point(output_zero_point, "output");
    check_activation_range(act_min, act_max);
    const double* ps = checked_data<double>(scale, "scale");
    if (scale.ndim() != 1 || static_cast<size_t>(scale.size()) != n) {
      throw std::invalid_argument("scale: expected " + std::to_string(n) + " values, got shape " + shape_str(scale));
    }
    const int8_t* in = reinterpret_cast<const int8_t*>(
        program_.span(in_offset, mul_bounded(rows, k, "fully connected input"), "fully connected input"));
    int8_t* out = reinterpret_cast<int8_t*>(
        program_.span(out_offset, mul_bounded(rows, n, "fully connected output"), "fully connected output"));
    check_requantization_scales(ps, n);
    Requantization rq = checked_requantization(std::vector<int32_t>(n, 0), std::vector<int32_t>(n, 0),
                                               output_zero_point, act_min, act_max);
    auto gw = std::make_unique<qs8::GemmWeights>(w, n, k, optional_bias(bias, n), input_zero_point, std::move(rq),
                                                 std::vector<double>(ps, ps + n));
    program_.add(std::make_unique<engine::FullyConnectedStep>(std::move(gw), rows, in, out));
  }

  engine::Broadcast4 broadcast(const Size4& shape, const Size4& x_strides, const Size4& y_strides, size_t x_offset,
                               size_t y_offset, const int8_t** x, const int8_t** y) {
    engine::Broadcast4 b{shape, x_strides, y_strides, true};
    const size_t n = product(shape, "binary output");
    size_t x_extent = 1, y_extent = 1;  // one past the largest element index read
    for (size_t d = 0; d < 4; ++d) {
      if (shape[d] == 0) throw std::invalid_argument("binary: empty output dimension");
      x_extent += (shape[d] - 1) * x_strides[d];
      y_extent += (shape[d] - 1) * y_strides[d];
    }
    size_t contiguous = 1;
    for (size_t d = 4; d-- > 0;) {
      b.same_shape = b.same_shape && x_strides[d] == contiguous && y_strides[d] == contiguous;
      contiguous *= shape[d];
    }
    if (x_extent > kMaxElements || y_extent > kMaxElements) throw std::invalid_argument("binary: strides too large");
    *x = reinterpret_cast<const int8_t*>(program_.span(x_offset, x_extent, "binary input 1"));
    *y = reinterpret_cast<const int8_t*>(program_.span(y_offset, y_extent, "binary input 2"));
    (void)n;
    return b;
  }

  static qs8::AddParams checked_add_params(const std::array<int32_t, 12>& q) {
    const qs8::AddParams p{q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11]};
    check_int8_zero_point(-p.input1_offset, "input 1");
    check_int8_zero_point(-p.input2_offset, "input 2");
    check_int8_zero_point(p.output_offset, "output");
    if (p.left_shift < 0 || p.left_shift > 22) throw std::invalid_argument("add: left shift must be in [0, 22]");
    for (int32_t sh : {p.input1_shift, p.input2_shift, p.output_shift}) {
      if (sh < -31 || sh > 0) throw std::invalid_argument("add: shifts must be in [-31, 0], got " + std::to_string(sh));
    }
    check_activation_range(p.act_min, p.act_max);
    return p;
  }

  // The channel count of per-channel tables [channels, 256] over n values.
  static size_t checked_channel_tables(const py::array& tables, size_t n, int split) {
    checked_data<int8_t>(tables, "tables");
    check_ndim(tables, "tables", 2);
    const auto channels = static_cast<size_t>(tables.shape(0));
    check_shape(tables, "tables", {static_cast<py::ssize_t>(channels), 256});
    if (channels == 0 || n % channels != 0)
      throw std::invalid_argument("channel_lut: channels do not divide the values");
    if (split < -128 || split > 128) throw std::invalid_argument("channel_lut: split outside [-128, 128]");
    return channels;
  }

  void add(size_t x_offset, size_t y_offset, size_t out_offset, const Size4& shape, const Size4& x_strides,
           const Size4& y_strides, const std::array<int32_t, 12>& q, bool subtract) {
    const int8_t *x, *y;
    const engine::Broadcast4 b = broadcast(shape, x_strides, y_strides, x_offset, y_offset, &x, &y);
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, b.size(), "add output"));
    program_.add(std::make_unique<engine::AddStep>(checked_add_params(q), b, x, y, out, subtract));
  }

  // An ADD of two tensors of n values each whose sum only a per-channel table reads (tables,
  // split: as channel_lut's), as one step.
  void add_channel_lut(const std::string& op, size_t x_offset, size_t y_offset, size_t out_offset, size_t n,
                       const std::array<int32_t, 12>& q, const py::array& tables, int split) {
    const qs8::AddParams p = checked_add_params(q);
    const size_t channels = checked_channel_tables(tables, n, split);
    const int8_t* t = checked_data<int8_t>(tables, "tables");
    const auto* x = reinterpret_cast<const int8_t*>(program_.span(x_offset, n, "add input 1"));
    const auto* y = reinterpret_cast<const int8_t*>(program_.span(y_offset, n, "add input 2"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, n, "add_channel_lut output"));
    program_.add(std::make_unique<engine::AddTableStep>(op, p, std::vector<int8_t>(t, t + channels * 256), channels, n,
                                                        x, y, out, split));
  }

  void mul(size_t x_offset, size_t y_offset, size_t out_offset, const Size4& shape, const Size4& x_strides,
           const Size4& y_strides, const std::array<int32_t, 7>& q) {
    const int8_t *x, *y;
    const engine::Broadcast4 b = broadcast(shape, x_strides, y_strides, x_offset, y_offset, &x, &y);
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, b.size(), "mul output"));
    const qs8::MulParams p{q[0], q[1], q[2], q[3], q[4], q[5], q[6]};
    check_int8_zero_point(-p.input1_offset, "input 1");
    check_int8_zero_point(-p.input2_offset, "input 2");
    check_int8_zero_point(p.output_offset, "output");
    if (p.output_shift < -31 || p.output_shift > 14) throw std::invalid_argument("mul: shift must be in [-31, 14]");
    check_activation_range(p.act_min, p.act_max);
    program_.add(std::make_unique<engine::MulStep>(p, b, x, y, out));
  }

  // geometry: (batch, in_h, in_w, channels, out_h, out_w, filter_h, filter_w, stride_h, stride_w, pad_top, pad_left)
  void pool(bool is_max, size_t in_offset, size_t out_offset, const ConvTuple& t, int32_t act_min, int32_t act_max) {
    for (int64_t v : t) {
      if (v < 0) throw std::invalid_argument("pool geometry values must be >= 0");
    }
    const qs8::PoolGeometry g{static_cast<size_t>(t[0]),
                              static_cast<size_t>(t[1]),
                              static_cast<size_t>(t[2]),
                              static_cast<size_t>(t[3]),
                              static_cast<size_t>(t[4]),
                              static_cast<size_t>(t[5]),
                              static_cast<size_t>(t[6]),
                              static_cast<size_t>(t[7]),
                              static_cast<size_t>(t[8]),
                              static_cast<size_t>(t[9]),
                              static_cast<ptrdiff_t>(t[10]),
                              static_cast<ptrdiff_t>(t[11]),
                              act_min,
                              act_max};
    check_positive(
        {g.batch, g.in_h, g.in_w, g.channels, g.out_h, g.out_w, g.filter_h, g.filter_w, g.stride_h, g.stride_w},
        "pool sizes");
    check_padding(g.pad_top, g.pad_left);
    check_activation_range(act_min, act_max);
    for (size_t o = 0; o < g.out_h; ++o) {
      size_t s, e;
      qs8::pool_window(o, g.stride_h, g.pad_top, g.filter_h, g.in_h, &s, &e);
      if (s == e) throw std::invalid_argument("pool: output row " + std::to_string(o) + " has an empty window");
    }
    for (size_t o = 0; o < g.out_w; ++o) {
      size_t s, e;
      qs8::pool_window(o, g.stride_w, g.pad_left, g.filter_w, g.in_w, &s, &e);
      if (s == e) throw std::invalid_argument("pool: output column " + std::to_string(o) + " has an empty window");
    }
    const int8_t* in = reinterpret_cast<const int8_t*>(
        program_.span(in_offset, nhwc_bytes(g.batch, g.in_h, g.in_w, g.channels, "pool input"), "pool input"));
    int8_t* out = reinterpret_cast<int8_t*>(
        program_.span(out_offset, nhwc_bytes(g.batch, g.out_h, g.out_w, g.channels, "pool output"), "pool output"));
    program_.add(std::make_unique<engine::PoolStep>(is_max, g, in, out));
  }

  void lut(const std::string& op, size_t in_offset, size_t out_offset, size_t n, const py::array& table) {
    const int8_t* t = checked_data<int8_t>(table, "table");
    check_shape(table, "table", {256});
    const int8_t* in = reinterpret_cast<const int8_t*>(program_.span(in_offset, n, "lut input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, n, "lut output"));
    program_.add(std::make_unique<engine::LutStep>(op, t, n, in, out));
  }

  void channel_lut(const std::string& op, size_t in_offset, size_t out_offset, size_t n, const py::array& tables,
                   int split) {
    const size_t channels = checked_channel_tables(tables, n, split);
    const int8_t* t = checked_data<int8_t>(tables, "tables");
    const int8_t* in = reinterpret_cast<const int8_t*>(program_.span(in_offset, n, "channel_lut input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, n, "channel_lut output"));
    program_.add(std::make_unique<engine::ChannelTableStep>(op, std::vector<int8_t>(t, t + channels * 256), channels, n,
                                                            in, out, split));
  }

  void prelu(size_t in_offset, size_t out_offset, size_t n, int32_t input_zero_point, int32_t output_zero_point,
             int32_t positive_multiplier, int32_t positive_shift, int32_t negative_multiplier, int32_t negative_shift,
             const py::array& alpha, const py::array& tables) {
    check_int8_zero_point(input_zero_point, "input");
    check_int8_zero_point(output_zero_point, "output");
    for (auto [m, sh] :
         {std::pair{positive_multiplier, positive_shift}, std::pair{negative_multiplier, negative_shift}}) {
      if (m < 0 || sh < -31 || sh > 30) throw std::invalid_argument("prelu: multiplier or shift out of range");
    }
    const int32_t* a = checked_data<int32_t>(alpha, "alpha");
    const int8_t* t = checked_data<int8_t>(tables, "tables");
    check_ndim(alpha, "alpha", 1);
    const size_t channels = static_cast<size_t>(alpha.size());
    check_shape(tables, "tables", {static_cast<py::ssize_t>(channels), 256});
    if (channels == 0 || n % channels != 0) throw std::invalid_argument("prelu: channels do not divide the values");
    for (size_t c = 0; c < channels; ++c) {
      if (a[c] < -255 || a[c] > 255) throw std::invalid_argument("prelu: alpha - zero point outside [-255, 255]");
    }
    const int8_t* in = reinterpret_cast<const int8_t*>(program_.span(in_offset, n, "prelu input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, n, "prelu output"));
    engine::PreluParams p{input_zero_point,
                          output_zero_point,
                          positive_multiplier,
                          positive_shift,
                          negative_multiplier,
                          negative_shift,
                          std::vector<int32_t>(a, a + channels),
                          std::vector<int8_t>(t, t + channels * 256)};
    program_.add(std::make_unique<engine::PreluStep>(std::move(p), n / channels, in, out));
  }

  void softmax(size_t in_offset, size_t out_offset, size_t rows, size_t depth, float input_scale, float beta) {
    check_positive({rows, depth}, "softmax sizes");
    check_scale(input_scale, "input");
    if (!(beta > 0.0f) || !std::isfinite(beta))
      throw std::invalid_argument("softmax: beta must be positive and finite");
    const size_t n = mul_bounded(rows, depth, "softmax");
    const qs8::SoftmaxParams p = qs8::softmax_params(input_scale, beta);
    const int8_t* in = reinterpret_cast<const int8_t*>(program_.span(in_offset, n, "softmax input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, n, "softmax output"));
    program_.add(std::make_unique<engine::SoftmaxStep>(p, rows, depth, in, out));
  }

  void quantize(size_t in_offset, size_t out_offset, size_t n, float scale, int32_t zero_point) {
    check_scale(scale, "output");
    check_int8_zero_point(zero_point, "output");
    const auto* in = reinterpret_cast<const float*>(
        program_.span(in_offset, mul_bounded(n, sizeof(float), "quantize"), "quantize input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(out_offset, n, "quantize output"));
    program_.add(std::make_unique<engine::QuantizeStep>(engine::AffineQuantization{scale, zero_point}, n, in, out));
  }

  void dequantize(size_t in_offset, size_t out_offset, size_t n, float scale, int32_t zero_point, bool is_unsigned) {
    check_scale(scale, "input");
    if (zero_point < (is_unsigned ? 0 : -128) || zero_point > (is_unsigned ? 255 : 127)) {
      throw std::invalid_argument("dequantize: zero point " + std::to_string(zero_point) +
                                  " is outside the input type");
    }
    const int8_t* in = reinterpret_cast<const int8_t*>(program_.span(in_offset, n, "dequantize input"));
    auto* out = reinterpret_cast<float*>(
        program_.span(out_offset, mul_bounded(n, sizeof(float), "dequantize"), "dequantize output"));
    program_.add(std::make_unique<engine::DequantizeStep>(engine::AffineQuantization{scale, zero_point, is_unsigned}, n,
                                                          in, out));
  }

  void concat(size_t out_offset, size_t outer, const std::vector<std::pair<size_t, size_t>>& parts) {
    std::vector<engine::ConcatStep::Part> ps;
    size_t per_outer = 0;
    for (const auto& [offset, bytes] : parts) {
      ps.push_back({program_.span(offset, mul_bounded(outer, bytes, "concat input"), "concat input"), bytes});
      per_outer += bytes;
    }
    uint8_t* out = program_.span(out_offset, mul_bounded(outer, per_outer, "concat output"), "concat output");
    program_.add(std::make_unique<engine::ConcatStep>(std::move(ps), outer, out));
  }

  void pad(size_t in_offset, size_t out_offset, const Size4& in_shape, const Size4& before, const Size4& out_shape,
           size_t element_bytes, uint8_t value) {
    if (element_bytes == 0 || element_bytes > 8) throw std::invalid_argument("pad: element size must be 1..8");
    for (size_t d = 0; d < 4; ++d) {
      if (in_shape[d] == 0 || before[d] > out_shape[d] || in_shape[d] > out_shape[d] - before[d]) {
        throw std::invalid_argument("pad: input dimension " + std::to_string(d) + " of " + std::to_string(in_shape[d]) +
                                    " after " + std::to_string(before[d]) + " does not fit the output's " +
                                    std::to_string(out_shape[d]));
      }
    }
    const uint8_t* in =
        program_.span(in_offset, mul_bounded(product(in_shape, "pad input"), element_bytes, "pad input"), "pad input");
    uint8_t* out = program_.span(out_offset, mul_bounded(product(out_shape, "pad output"), element_bytes, "pad output"),
                                 "pad output");
    program_.add(std::make_unique<engine::PadStep>(in_shape, before, out_shape, element_bytes, value, in, out));
  }

  void mean(size_t in_offset, size_t out_offset, size_t outer, size_t count, size_t inner, int32_t multiplier,
            int32_t shift, int32_t input_zero_point, int32_t output_zero_point) {
    check_positive({outer, count, inner}, "mean sizes");
    if (count > (size_t{1} << 22)) throw std::invalid_argument("mean: more than 2^22 values per output");
    check_int8_zero_point(input_zero_point, "input");
    check_int8_zero_point(output_zero_point, "output");
    if (multiplier < 0 || shift < -31 || shift > 30)
      throw std::invalid_argument("mean: multiplier or shift out of range");
    const size_t in_bytes = mul_bounded(mul_bounded(outer, count, "mean input"), inner, "mean input");
    const int8_t* in = reinterpret_cast<const int8_t*>(program_.span(in_offset, in_bytes, "mean input"));
    int8_t* out =
        reinterpret_cast<int8_t*>(program_.span(out_offset, mul_bounded(outer, inner, "mean"), "mean output"));
    const engine::MeanStep::Params p{outer, count, inner, multiplier, shift, input_zero_point, output_zero_point};
    program_.add(std::make_unique<engine::MeanStep>(p, in, out));
  }

  void gather(const std::string& op, size_t in_offset, size_t in_bytes, size_t out_offset, const py::array& starts,
              size_t run_bytes) {
    const int64_t* st = checked_data<int64_t>(starts, "starts");
    check_ndim(starts, "starts", 1);
    const size_t runs = static_cast<size_t>(starts.size());
    if (run_bytes == 0 || run_bytes > in_bytes) throw std::invalid_argument("gather: run must be in [1, input bytes]");
    const uint8_t* in = program_.span(in_offset, in_bytes, "gather input");
    uint8_t* out = program_.span(out_offset, mul_bounded(runs, run_bytes, "gather output"), "gather output");
    std::vector<size_t> begins(runs);
    for (size_t r = 0; r < runs; ++r) {
      if (st[r] < 0 || static_cast<size_t>(st[r]) > in_bytes - run_bytes) {
        throw std::invalid_argument("gather: run " + std::to_string(r) + " starts at " + std::to_string(st[r]) +
                                    ", outside the input's " + std::to_string(in_bytes) + " bytes");
      }
      begins[r] = static_cast<size_t>(st[r]);
    }
    program_.add(std::make_unique<engine::GatherStep>(op, std::move(begins), run_bytes, in, out));
  }

  // ys / xs: (lower, upper, weight) int32 arrays per output row / column.
  void resize_bilinear(size_t in_offset, size_t out_offset, size_t batch, size_t in_h, size_t in_w, size_t channels,
                       const std::array<py::array, 3>& ys, const std::array<py::array, 3>& xs) {
    check_positive({batch, in_h, in_w, channels}, "resize sizes");
    auto axis = [](const std::array<py::array, 3>& a, size_t in_size, const char* what) {
      engine::ResizeBilinearStep::Axis r;
      std::vector<int32_t>* fields[3] = {&r.lower, &r.upper, &r.weight};
      const size_t n = static_cast<size_t>(a[0].size());
      for (size_t k = 0; k < 3; ++k) {
        const int32_t* p = checked_data<int32_t>(a[k], what);
        if (a[k].ndim() != 1 || static_cast<size_t>(a[k].size()) != n || n == 0) {
          throw std::invalid_argument(std::string(what) + ": expected three equal non-empty 1-D arrays");
        }
        fields[k]->assign(p, p + n);
      }
      for (size_t i = 0; i < n; ++i) {
        if (r.lower[i] < 0 || r.upper[i] < 0 || static_cast<size_t>(r.lower[i]) >= in_size ||
            static_cast<size_t>(r.upper[i]) >= in_size || r.weight[i] < -(1 << 20) || r.weight[i] > (1 << 20)) {
          throw std::invalid_argument(std::string(what) + ": source index or weight out of range at " +
                                      std::to_string(i));
        }
      }
      return r;
    };
    engine::ResizeBilinearStep::Axis y = axis(ys, in_h, "rows"), x = axis(xs, in_w, "columns");
    const int8_t* in = reinterpret_cast<const int8_t*>(
        program_.span(in_offset, nhwc_bytes(batch, in_h, in_w, channels, "resize input"), "resize input"));
    int8_t* out = reinterpret_cast<int8_t*>(program_.span(
        out_offset, nhwc_bytes(batch, y.lower.size(), x.lower.size(), channels, "resize output"), "resize output"));
    program_.add(
        std::make_unique<engine::ResizeBilinearStep>(batch, in_h, in_w, channels, std::move(y), std::move(x), in, out));
  }

  void copy(size_t src_offset, size_t dst_offset, size_t bytes) {
    const uint8_t* src = program_.span(src_offset, bytes, "copy source");
    uint8_t* dst = program_.span(dst_offset, bytes, "copy destination");
    program_.add(std::make_unique<engine::CopyStep>(src, dst, bytes));
  }

  void run() const {
    py::gil_scoped_release release;
    program_.run();
  }

  std::vector<double> profile(size_t runs) const {
    if (runs == 0 || runs > 100000) throw std::invalid_argument("profile: runs must be in [1, 100000]");
    py::gil_scoped_release release;
    return program_.profile(runs);
  }

  std::vector<std::string> step_names() const {
    std::vector<std::string> names;
    for (size_t i = 0; i < program_.size(); ++i) names.emplace_back(program_.step(i).name());
    return names;
  }

  size_t arena_bytes() const { return program_.arena_bytes(); }
  size_t threads() const { return program_.threads(); }
  size_t runs_alone() const { return program_.runs_alone(); }

 private:
  Program program_;
  std::shared_ptr<std::vector<int8_t>> scratch_ = std::make_shared<std::vector<int8_t>>();
};

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<PyProgram>(m, "EngineProgram")
      .def(py::init<size_t, size_t>(), py::arg("arena_bytes"), py::arg("threads") = 1)
      .def(
          "view",
          [](py::object self, size_t offset, const std::vector<py::ssize_t>& shape, const py::dtype& dtype) {
            return self.cast<PyProgram&>().view(self, offset, shape, dtype);
          },
          py::arg("offset"), py::arg("shape"), py::arg("dtype"))
      .def("write", &PyProgram::write, py::arg("offset"), py::arg("data"))
      .def("conv2d", &PyProgram::conv2d, py::arg("in_offset"), py::arg("out_offset"), py::arg("weights"),
           py::arg("bias"), py::arg("input_zero_point"), py::arg("multiplier"), py::arg("shift"),
           py::arg("output_zero_point"), py::arg("act_min"), py::arg("act_max"), py::arg("geometry"))
      .def("depthwise_conv2d", &PyProgram::depthwise_conv2d, py::arg("in_offset"), py::arg("out_offset"),
           py::arg("weights"), py::arg("bias"), py::arg("depth_multiplier"), py::arg("input_zero_point"),
           py::arg("multiplier"), py::arg("shift"), py::arg("output_zero_point"), py::arg("act_min"),
           py::arg("act_max"), py::arg("geometry"))
      .def("depthwise_conv2d_padded", &PyProgram::depthwise_conv2d_padded, py::arg("in_offset"), py::arg("out_offset"),
           py::arg("padded_channels"), py::arg("weights"), py::arg("bias"), py::arg("input_zero_point"),
           py::arg("multiplier"), py::arg("shift"), py::arg("output_zero_point"), py::arg("act_min"),
           py::arg("act_max"), py::arg("geometry"))
      .def("fully_connected", &PyProgram::fully_connected, py::arg("in_offset"), py::arg("out_offset"), py::arg("rows"),
           py::arg("weights"), py::arg("bias"), py::arg("input_zero_point"), py::arg("scale"),
           py::arg("output_zero_point"), py::arg("act_min"), py::arg("act_max"))
      .def("add", &PyProgram::add, py::arg("x_offset"), py::arg("y_offset"), py::arg("out_offset"), py::arg("shape"),
           py::arg("x_strides"), py::arg("y_strides"), py::arg("params"), py::arg("subtract") = false)
      .def("add_channel_lut", &PyProgram::add_channel_lut, py::arg("op"), py::arg("x_offset"), py::arg("y_offset"),
           py::arg("out_offset"), py::arg("n"), py::arg("params"), py::arg("tables"), py::arg("split"))
      .def("mul", &PyProgram::mul, py::arg("x_offset"), py::arg("y_offset"), py::arg("out_offset"), py::arg("shape"),
           py::arg("x_strides"), py::arg("y_strides"), py::arg("params"))
      .def("pool", &PyProgram::pool, py::arg("is_max"), py::arg("in_offset"), py::arg("out_offset"),
           py::arg("geometry"), py::arg("act_min"), py::arg("act_max"))
      .def("lut", &PyProgram::lut, py::arg("op"), py::arg("in_offset"), py::arg("out_offset"), py::arg("n"),
           py::arg("table"))
      .def("channel_lut", &PyProgram::channel_lut, py::arg("op"), py::arg("in_offset"), py::arg("out_offset"),
           py::arg("n"), py::arg("tables"), py::arg("split") = -128)
      .def("prelu", &PyProgram::prelu, py::arg("in_offset"), py::arg("out_offset"), py::arg("n"),
           py::arg("input_zero_point"), py::arg("output_zero_point"), py::arg("positive_multiplier"),
           py::arg("positive_shift"), py::arg("negative_multiplier"), py::arg("negative_shift"), py::arg("alpha"),
           py::arg("tables"))
      .def("softmax", &PyProgram::softmax, py::arg("in_offset"), py::arg("out_offset"), py::arg("rows"),
           py::arg("depth"), py::arg("input_scale"), py::arg("beta"))
      .def("quantize", &PyProgram::quantize, py::arg("in_offset"), py::arg("out_offset"), py::arg("n"),
           py::arg("scale"), py::arg("zero_point"))
      .def("dequantize", &PyProgram::dequantize, py::arg("in_offset"), py::arg("out_offset"), py::arg("n"),
           py::arg("scale"), py::arg("zero_point"), py::arg("is_unsigned"))
      .def("concat", &PyProgram::concat, py::arg("out_offset"), py::arg("outer"), py::arg("parts"))
      .def("pad", &PyProgram::pad, py::arg("in_offset"), py::arg("out_offset"), py::arg("in_shape"), py::arg("before"),
           py::arg("out_shape"), py::arg("element_bytes"), py::arg("value"))
      .def("mean", &PyProgram::mean, py::arg("in_offset"), py::arg("out_offset"), py::arg("outer"), py::arg("count"),
           py::arg("inner"), py::arg("multiplier"), py::arg("shift"), py::arg("input_zero_point"),
           py::arg("output_zero_point"))
      .def("gather", &PyProgram::gather, py::arg("op"), py::arg("in_offset"), py::arg("in_bytes"),
           py::arg("out_offset"), py::arg("starts"), py::arg("run_bytes"))
      .def("resize_bilinear", &PyProgram::resize_bilinear, py::arg("in_offset"), py::arg("out_offset"),
           py::arg("batch"), py::arg("in_h"), py::arg("in_w"), py::arg("channels"), py::arg("ys"), py::arg("xs"))
      .def("copy", &PyProgram::copy, py::arg("src_offset"), py::arg("dst_offset"), py::arg("bytes"))
      .def("run", &PyProgram::run)
      .def("profile", &PyProgram::profile, py::arg("runs"),
           "Runs the program `runs` times timing each step: the median seconds per step.")
      .def("step_names", &PyProgram::step_names)
      .def_property_readonly("arena_bytes", &PyProgram::arena_bytes)
      .def_property_readonly("threads", &PyProgram::threads)
      .def_property_readonly("runs_alone", &PyProgram::runs_alone,
                             "Runs made by the calling thread alone because the workers were not getting the CPU.")
      .def("__len__", [](const PyProgram& p) { return p.step_names().size(); });
}

}  // namespace edgeinf::bindings
