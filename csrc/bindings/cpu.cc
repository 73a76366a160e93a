// CPU features and the kernel path in use.
#include <pybind11/stl.h>

#include "../dispatch.h"
#include "bindings.h"

namespace py = pybind11;

namespace edgeinf::bindings {

void bind_cpu(py::module_& m) {
  m.def("cpu_features", [] {
    const CpuInfo& c = cpu_info();
    py::dict d;
    d["avx2"] = c.avx2;
    d["fma"] = c.fma;
    d["f16c"] = c.f16c;
    d["neon"] = c.neon;
    d["dotprod"] = c.dotprod;
    d["i8mm"] = c.i8mm;
    return d;
  });
  m.def("built_isas", [] {
    std::vector<std::string> out;
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kNeonDot})
      if (isa_built(isa)) out.emplace_back(isa_name(isa));
    return out;
  });
  m.def("supported_isas", [] {
    std::vector<std::string> out;
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kNeonDot})
      if (isa_supported(isa)) out.emplace_back(isa_name(isa));
    return out;
  });
  m.def("active_isa", [] { return std::string(isa_name(active_isa())); });
  m.def("best_isa", [] { return std::string(isa_name(best_isa())); });
  m.def(
      "set_isa",
      [](const std::string& name) {
        const Isa previous = active_isa();
        set_active_isa(parse_isa(name));
        return std::string(isa_name(previous));
      },
      py::arg("name"), "Force a kernel path; returns the previous one. Raises ValueError if unusable.");
}

}  // namespace edgeinf::bindings
