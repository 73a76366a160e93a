// edgeinf._C: the private native module. Thin: each family binds itself.
#include "../dispatch.h"
#include "bindings.h"
#include "errors.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "edgeinf native kernels (private; use edgeinf.kernels, edgeinf.preprocess, edgeinf.quant)";
  edgeinf::apply_isa_environment();  // a bad EDGEINF_ISA fails the import, naming the variable
  edgeinf::bindings::register_errors(m);
  edgeinf::bindings::bind_cpu(m);
  edgeinf::bindings::bind_quant(m);
  edgeinf::bindings::bind_postprocess(m);
  edgeinf::bindings::bind_preprocess(m);
  edgeinf::bindings::bind_engine(m);
  edgeinf::bindings::bind_warp(m);
}
