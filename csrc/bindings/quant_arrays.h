// Array checks shared by the int8 and post-processing bindings: dtype, rank, shape and
// memory layout are validated before any pointer is taken, and failures raise
// ValueError (std::invalid_argument) naming the expected and the given value.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace edgeinf::bindings {

inline std::string shape_str(const pybind11::array& a) {
  std::string s = "(";
  for (pybind11::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

template <class T>
inline const char* dtype_name();
template <>
inline const char* dtype_name<int8_t>() { return "int8"; }
template <>
inline const char* dtype_name<uint8_t>() { return "uint8"; }
template <>
inline const char* dtype_name<int32_t>() { return "int32"; }
template <>
inline const char* dtype_name<int64_t>() { return "int64"; }
template <>
inline const char* dtype_name<float>() { return "float32"; }
template <>
inline const char* dtype_name<double>() { return "float64"; }

// Checks dtype and C-contiguity (and writability when `writable`), returns the data pointer.
template <class T>
inline T* checked_data(const pybind11::array& a, const char* what, bool writable = false) {
  if (!a.dtype().is(pybind11::dtype::of<T>())) {
    throw std::invalid_argument(std::string(what) + ": expected dtype " + dtype_name<T>() + ", got " +
                                std::string(pybind11::str(a.dtype())));
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

inline void check_scale(double s, const char* what) {
  if (!(s > 0.0) || !std::isfinite(s)) {
    throw std::invalid_argument(std::string(what) + ": scale must be positive and finite, got " + std::to_string(s));
  }
}

}  // namespace edgeinf::bindings
