// Per-call entry points without pybind11's dispatcher: plain CPython METH_FASTCALL functions
// that find their C++ object through a capsule. The dispatcher's code costs several
// microseconds of a cold call (docs/preprocess.md); the per-frame image pipeline and the
// prepared int8 layers use these (preprocess.cc, quant.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>

namespace edgeinf::bindings {

// A capsule named `name` holding obj's address; valid while obj lives (the caller keeps it).
template <class T>
pybind11::object address_capsule(const T& obj, const char* name) {
  return pybind11::reinterpret_steal<pybind11::object>(PyCapsule_New(const_cast<T*>(&obj), name, nullptr));
}

// f() (a new reference, or nullptr with a Python error set), with C++ exceptions turned into
// the Python errors pybind11 would raise: std::invalid_argument -> ValueError.
template <class F>
PyObject* call_translating(F&& f) noexcept {
  try {
    return f();
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

// Adds the METH_FASTCALL function `def` (static storage) to module m under def.ml_name.
inline void add_fastcall(pybind11::module_& m, PyMethodDef& def) {
  m.add_object(def.ml_name, pybind11::reinterpret_steal<pybind11::object>(
                                PyCFunction_NewEx(&def, nullptr, m.attr("__name__").ptr())));
}

}  // namespace edgeinf::bindings
