// CPU features, the kernel path in use and the thread pool.
#include <pybind11/stl.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "../dispatch.h"
#include "../kernels/qs8_gemm/gemm.h"
#include "../threadpool.h"
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
    d["avx_vnni"] = c.avx_vnni;
    d["avx512_vnni"] = c.avx512_vnni;
    d["amx_int8"] = c.amx_int8;
    d["neon"] = c.neon;
    d["dotprod"] = c.dotprod;
    d["i8mm"] = c.i8mm;
    d["arm_core"] = c.arm_core != nullptr ? py::str(c.arm_core) : py::object(py::none());
    d["arm_out_of_order"] = c.arm_out_of_order;
    return d;
  });
  m.def("built_isas", [] {
    std::vector<std::string> out;
    for (Isa isa : kPublicIsas)
      if (isa_built(isa)) out.emplace_back(isa_name(isa));
    return out;
  });
  m.def("supported_isas", [] {
    std::vector<std::string> out;
    for (Isa isa : kPublicIsas)
      if (isa_supported(isa)) out.emplace_back(isa_name(isa));
    return out;
  });
  m.def(
      "emulated_isas",
      [] {
        std::vector<std::string> out;
        if (isa_supported(Isa::kAvx2EmulatedVnni)) out.emplace_back(isa_name(Isa::kAvx2EmulatedVnni));
        return out;
      },
      "Test paths usable here that emulate an instruction exactly with ones the CPU has.");
  m.def("active_isa", [] { return std::string(isa_name(active_isa())); });
  m.def(
      "_gemm_variant", [] { return std::string(qs8::qs8_gemm_variant_name()); },
      "Test probe: the path whose int8 GEMM (fully connected, convolution) runs now.");
  m.def("best_isa", [] { return std::string(isa_name(best_isa())); });
  m.def(
      "set_isa",
      [](const std::string& name) {
        const Isa previous = active_isa();
        set_active_isa(parse_isa(name));
        return std::string(isa_name(previous));
      },
      py::arg("name"), "Force a kernel path; returns the previous one. Raises InputError if unusable.");

  m.def("pool_threads", &pool_threads, "Threads a parallel kernel can use: the pool's workers plus the caller.");
  m.def(
      "_parallel_for_probe",
      [](size_t count, size_t max_threads, int64_t fail_at) {
        if (count > (size_t{1} << 20)) throw std::invalid_argument("count must be at most 2**20");
        std::vector<std::atomic<int>> runs(count);
        std::mutex mu;
        std::set<std::thread::id> threads;
        {
          py::gil_scoped_release release;
          parallel_for(count, max_threads, [&](size_t i) {
            runs[i].fetch_add(1);
            {
              std::lock_guard<std::mutex> lock(mu);
              threads.insert(std::this_thread::get_id());
            }
            if (static_cast<int64_t>(i) == fail_at)
              throw std::invalid_argument("task " + std::to_string(i) + " failed");
          });
        }
        std::vector<int> out(runs.begin(), runs.end());
        return py::make_tuple(out, threads.size());
      },
      py::arg("count"), py::arg("max_threads"), py::arg("fail_at") = -1,
      "Test probe of the thread pool: runs `count` tasks on at most `max_threads` threads (task `fail_at` "
      "throws); returns (runs per task, threads used).");
}

}  // namespace edgeinf::bindings
