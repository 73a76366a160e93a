// The Python exceptions native code raises. A C++ std::invalid_argument (and the other
// std::logic_error kinds a bad argument causes) becomes edgeinf.errors.InputError, for
// pybind11-bound functions through a registered translator and for the METH_FASTCALL entry
// points through call_translating (fastcall.h): one exception family for every public call.
#pragma once

#include <pybind11/pybind11.h>

namespace edgeinf::bindings {

// Imports edgeinf.errors.InputError and registers the translator; module init calls it first.
void register_errors(pybind11::module_& m);

// edgeinf.errors.InputError (borrowed; valid once register_errors ran).
PyObject* input_error_type();

// Sets the Python error for the exception being handled (call inside a catch block).
void set_python_error_from_current_exception() noexcept;

}  // namespace edgeinf::bindings
