// Per-call entry points without pybind11's dispatcher: plain CPython METH_FASTCALL functions
// that find their C++ object through a capsule. The dispatcher's code costs several
// microseconds of a cold call (docs/preprocess.md); the per-frame image pipeline and the
// prepared int8 layers use these (preprocess.cc, quant.cc).
#pragma once

#include <pybind11/pybind11.h>

#include "errors.h"

namespace edgeinf::bindings {

// A capsule named `name` holding `object`'s address, which lives inside the Python object
// `owner` (a pybind11 instance): the capsule keeps a reference to `owner`, so the address
// stays valid as long as the capsule does, whoever else drops the owner.
template <class T>
pybind11::object owner_capsule(const pybind11::object& owner, const T& object, const char* name) {
  PyObject* capsule = PyCapsule_New(const_cast<T*>(&object), name, [](PyObject* self) {
    Py_XDECREF(static_cast<PyObject*>(PyCapsule_GetContext(self)));
  });
  if (capsule == nullptr) throw pybind11::error_already_set();
  if (PyCapsule_SetContext(capsule, owner.inc_ref().ptr()) != 0) {
    owner.dec_ref();
    Py_DECREF(capsule);
    throw pybind11::error_already_set();
  }
  return pybind11::reinterpret_steal<pybind11::object>(capsule);
}

// f() (a new reference, or nullptr with a Python error set), with C++ exceptions turned into
// the Python errors the bound functions raise (errors.h): std::invalid_argument -> InputError.
template <class F>
PyObject* call_translating(F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    set_python_error_from_current_exception();
  }
  return nullptr;
}

// Adds the METH_FASTCALL function `def` (static storage) to module m under def.ml_name.
inline void add_fastcall(pybind11::module_& m, PyMethodDef& def) {
  m.add_object(def.ml_name, pybind11::reinterpret_steal<pybind11::object>(
                                PyCFunction_NewEx(&def, nullptr, m.attr("__name__").ptr())));
}

}  // namespace edgeinf::bindings
