// Checks shared by the bindings: dtype, rank, shape and memory layout are validated before
// any pointer is taken, parameters before any kernel state is built from them, and failures
// raise InputError (std::invalid_argument) naming the expected and the given value.
//
// The bindings are where edgeinf validates: _C is private but callable, so every check that
// guards memory or an assumption of a kernel lives here, once, and holds for every caller
// (edgeinf.quant, the engine, a direct call). The Python layer only turns Python values into
// the typed arguments (numbers, int32 arrays, names to codes) and checks what its own
// arithmetic needs; the kernels state their preconditions as debug asserts.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../quant/requantization.h"

namespace edgeinf::bindings {

inline std::string shape_str(const pybind11::array& a) {
  std::string s = "(";
  for (pybind11::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// Checks dtype and C-contiguity (and writability when `writable`), returns the data pointer.
template <class T>
inline T* checked_data(const pybind11::array& a, const char* what, bool writable = false) {
  const pybind11::dtype expected = pybind11::dtype::of<T>();
  if (!a.dtype().is(expected)) {
    throw std::invalid_argument(std::string(what) + ": expected dtype " + std::string(pybind11::str(expected)) +
                                ", got " + std::string(pybind11::str(a.dtype())));
  }
  if (!(a.flags() & pybind11::array::c_style)) {
    throw std::invalid_argument(std::string(what) + ": expected a C-contiguous array (use np.ascontiguousarray)");
  }
  if (writable && !a.writeable()) throw std::invalid_argument(std::string(what) + ": array is read-only");
  return static_cast<T*>(const_cast<void*>(a.data()));
}

inline void check_ndim(const pybind11::array& a, const char* what, pybind11::ssize_t ndim) {
  if (a.ndim() != ndim) {
    throw std::invalid_argument(std::string(what) + ": expected " + std::to_string(ndim) + " dimensions, got shape " +
                                shape_str(a));
  }
}

inline void check_shape(const pybind11::array& a, const char* what, const std::vector<pybind11::ssize_t>& shape) {
  bool ok = a.ndim() == static_cast<pybind11::ssize_t>(shape.size());
  for (size_t i = 0; ok && i < shape.size(); ++i) ok = a.shape(i) == shape[i];
  if (!ok) {
    std::string want = "(";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    want += shape.size() == 1 ? ",)" : ")";
    throw std::invalid_argument(std::string(what) + ": expected shape " + want + ", got " + shape_str(a));
  }
}

// `out` if given (checked), else a new array of `shape`.
template <class T>
inline pybind11::array_t<T> output_array(const pybind11::object& out, const std::vector<pybind11::ssize_t>& shape,
                                         const char* what = "out") {
  if (out.is_none()) return pybind11::array_t<T>(shape);
  if (!pybind11::isinstance<pybind11::array>(out)) {
    throw std::invalid_argument(std::string(what) + ": expected a numpy array");
  }
  pybind11::array arr = pybind11::reinterpret_borrow<pybind11::array>(out);
  checked_data<T>(arr, what, true);
  check_shape(arr, what, shape);
  return pybind11::reinterpret_borrow<pybind11::array_t<T>>(out);
}

inline void check_int8_zero_point(int32_t zp, const char* what) {
  if (zp < -128 || zp > 127) {
    throw std::invalid_argument(std::string(what) + ": zero point must be in [-128, 127], got " + std::to_string(zp));
  }
}

inline void check_activation_range(int32_t act_min, int32_t act_max) {
  if (act_min < -128 || act_max > 127 || act_min > act_max) {
    throw std::invalid_argument("activation range must satisfy -128 <= min <= max <= 127, got [" +
                                std::to_string(act_min) + ", " + std::to_string(act_max) + "]");
  }
}

// Per-channel factors of a double requantization (qs8::requantize_double).
inline void check_requantization_scales(const double* scale, size_t n) {
  for (size_t c = 0; c < n; ++c) {
    if (!(scale[c] >= 0.0) || !std::isfinite(scale[c])) {
      throw std::invalid_argument("requantization scale must be finite and >= 0, got " + std::to_string(scale[c]));
    }
  }
}

// Weights of a GEMM or convolution: at least one output channel and one input value each.
inline void check_weight_sizes(size_t n, size_t k) {
  if (n == 0 || k == 0) {
    throw std::invalid_argument("weights must have at least one output channel and one input value, got [" +
                                std::to_string(n) + ", " + std::to_string(k) + "]");
  }
}

// A Requantization of untrusted parameters: as many shifts as multipliers (at least one),
// multipliers >= 0, shifts in [-31, 30], an int8 zero point and activation range.
inline qs8::Requantization checked_requantization(std::vector<int32_t> multiplier, std::vector<int32_t> shift,
                                                  int32_t output_zero_point, int32_t act_min, int32_t act_max) {
  if (multiplier.size() != shift.size() || multiplier.empty()) {
    throw std::invalid_argument("requantization: expected as many shifts as multipliers (>= 1), got " +
                                std::to_string(multiplier.size()) + " multipliers and " + std::to_string(shift.size()) +
                                " shifts");
  }
  for (size_t c = 0; c < multiplier.size(); ++c) {
    if (multiplier[c] < 0) {
      throw std::invalid_argument("requantization: multiplier must be >= 0, got " + std::to_string(multiplier[c]) +
                                  " at channel " + std::to_string(c));
    }
    if (shift[c] < -31 || shift[c] > 30) {
      throw std::invalid_argument("requantization: shift must be in [-31, 30], got " + std::to_string(shift[c]) +
                                  " at channel " + std::to_string(c) + " (real multiplier out of range)");
    }
  }
  if (output_zero_point < -128 || output_zero_point > 127) {
    throw std::invalid_argument("requantization: output zero point must be in [-128, 127], got " +
                                std::to_string(output_zero_point));
  }
  check_activation_range(act_min, act_max);
  return qs8::Requantization(std::move(multiplier), std::move(shift), output_zero_point, act_min, act_max);
}

inline void check_scale(double s, const char* what) {
  if (!(s > 0.0) || !std::isfinite(s)) {
    throw std::invalid_argument(std::string(what) + ": scale must be positive and finite, got " + std::to_string(s));
  }
}

}  // namespace edgeinf::bindings
