#include "errors.h"

#include <new>
#include <stdexcept>

namespace py = pybind11;

namespace edgeinf::bindings {
namespace {

PyObject* g_input_error = nullptr;  // edgeinf.errors.InputError, a strong reference kept for the process

}  // namespace

void register_errors(py::module_&) {
  g_input_error = py::object(py::module_::import("edgeinf.errors").attr("InputError")).release().ptr();
  // Every exception a binding of _C lets through takes the one mapping below. Local to _C:
  // a global translator would also see the exceptions of every other pybind11 module that
  // shares pybind11's internals (matplotlib's ft2font raises py::attribute_error while
  // Python imports it) and turn them into RuntimeError.
  py::register_local_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (...) {
      set_python_error_from_current_exception();
    }
  });
}

PyObject* input_error_type() { return g_input_error; }

void set_python_error_from_current_exception() noexcept {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(g_input_error, e.what());
  } catch (const std::domain_error& e) {
    PyErr_SetString(g_input_error, e.what());
  } catch (const std::length_error& e) {
    PyErr_SetString(g_input_error, e.what());
  } catch (const std::out_of_range& e) {
    PyErr_SetString(g_input_error, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

}  // namespace edgeinf::bindings
