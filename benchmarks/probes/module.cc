// edgeinf._bench_probes: the benchmarks' native probes, a module of its own so that the
// shipped edgeinf._C carries no measurement code. Built by benchmarks/bench_probes.py.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include "bindings/quant_arrays.h"
#include "probes.h"

namespace py = pybind11;
using edgeinf::bindings::check_ndim;
using edgeinf::bindings::checked_data;

namespace {

bool cpu_has_avx2() {
#if defined(EDGEINF_BUILD_AVX2)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(EDGEINF_BUILD_AVX512VNNI)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

}  // namespace

PYBIND11_MODULE(_bench_probes, m) {
  m.doc() = "edgeinf benchmark probes (not part of the package; see benchmarks/bench_probes.py)";
  m.def(
      "read_rows_probe",
      [](const py::array& plane, const py::array& rows) {
        const uint8_t* base = checked_data<uint8_t>(plane, "plane");
        const int64_t* idx = checked_data<int64_t>(rows, "rows");
        check_ndim(plane, "plane", 2);
        check_ndim(rows, "rows", 1);
        const size_t h = static_cast<size_t>(plane.shape(0)), w = static_cast<size_t>(plane.shape(1));
        const size_t n = static_cast<size_t>(rows.size());
        for (size_t i = 0; i < n; ++i) {
          if (idx[i] < 0 || static_cast<size_t>(idx[i]) >= h) {
            throw std::invalid_argument("rows: index " + std::to_string(idx[i]) + " at position " + std::to_string(i) +
                                        " is outside the plane's " + std::to_string(h) + " rows");
          }
        }
        py::gil_scoped_release release;
        return edgeinf::bench_probes::read_rows(base, w, w, idx, n);
      },
      py::arg("plane"), py::arg("rows"),
      "Loads the listed rows of a C-contiguous uint8 plane, nothing else; returns the OR of their bytes.");

  m.def(
      "int8_peak_probe",
      [](size_t iterations) -> py::object {
#if defined(EDGEINF_BUILD_AVX2)
        if (!cpu_has_avx2()) return py::none();
        uint64_t ops = 0;
        {
          py::gil_scoped_release release;
          ops = edgeinf::bench_probes::int8_peak__avx2(iterations);
        }
        return py::int_(ops);
#else
        (void)iterations;
        (void)cpu_has_avx2;
        return py::none();
#endif
      },
      py::arg("iterations"), "int8 multiply-add throughput probe (AVX2); returns the operations done, or None.");

  m.def(
      "int8_vnni_peak_probe",
      [](size_t iterations) -> py::object {
#if defined(EDGEINF_BUILD_AVX512VNNI)
        if (!cpu_has_avx512_vnni()) return py::none();
        uint64_t ops = 0;
        {
          py::gil_scoped_release release;
          ops = edgeinf::bench_probes::int8_peak__avx512vnni(iterations);
        }
        return py::int_(ops);
#else
        (void)iterations;
        (void)cpu_has_avx512_vnni;
        return py::none();
#endif
      },
      py::arg("iterations"),
      "int8 multiply-add throughput probe (VPDPBUSD zmm); returns the operations done, or None without AVX-512 VNNI.");

  m.def(
      "int8_amx_peak_probe",
      [](size_t iterations) -> py::object {
#if defined(EDGEINF_BUILD_AVX512AMX)
        uint64_t ops = 0;
        {
          py::gil_scoped_release release;
          ops = edgeinf::bench_probes::int8_peak__avx512amx(iterations);
        }
        return py::int_(ops);
#else
        (void)iterations;
        return py::none();
#endif
      },
      py::arg("iterations"),
      "int8 multiply-add throughput probe (TDPBUSD tiles); call only on edgeinf's avx512amx path; None if not built.");
}
