// edgeinf._C: the private native module. Thin: each family binds itself.
#include "bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "edgeinf native kernels (private; use edgeinf.kernels, edgeinf.preprocess, edgeinf.quant)";
  edgeinf::bindings::bind_cpu(m);
  edgeinf::bindings::bind_quant(m);
  edgeinf::bindings::bind_postprocess(m);
  edgeinf::bindings::bind_preprocess(m);
  edgeinf::bindings::bind_engine(m);
}
