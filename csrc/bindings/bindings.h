// One registration function per kernel family; module.cc calls them all.
#pragma once

#include <pybind11/pybind11.h>

namespace edgeinf::bindings {

void bind_cpu(pybind11::module_& m);
void bind_quant(pybind11::module_& m);
void bind_postprocess(pybind11::module_& m);
void bind_preprocess(pybind11::module_& m);
void bind_engine(pybind11::module_& m);
void bind_warp(pybind11::module_& m);

}  // namespace edgeinf::bindings
