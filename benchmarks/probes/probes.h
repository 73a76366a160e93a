// Measurement probes of the benchmarks: native code that bounds what a kernel can reach
// on this machine, kept out of the shipped edgeinf._C (bench_probes.py builds them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgeinf::bench_probes {

// Reads rows[0..n) of a plane (row_bytes each, row_stride apart); returns the OR of
// their bytes. The caller checks that every row index is inside the plane.
uint64_t read_rows(const uint8_t* plane, size_t row_stride, size_t row_bytes, const int64_t* rows, size_t n);

// Throughput probe of the CPU's int8 multiply-add units (VPMADDUBSW + VPMADDWD, the
// usual definition of the AVX2 int8 peak): runs `iterations` rounds of independent
// chains and returns the number of int8 operations (multiply and add each count one).
// Call only when the CPU has AVX2 (int8_peak__avx2.cc is built for x86-64 only).
uint64_t int8_peak__avx2(size_t iterations);

// The same of VPDPBUSD on zmm registers (AVX-512 VNNI), 64 multiply-adds per instruction.
// Call only when the CPU has AVX-512 VNNI (built for x86-64 only).
uint64_t int8_peak__avx512vnni(size_t iterations);

// The same of TDPBUSD on AMX tiles, 16384 multiply-adds per instruction. Call only where
// edgeinf runs its avx512amx path (the CPU has AMX-INT8 and the process may use the tiles).
uint64_t int8_peak__avx512amx(size_t iterations);

}  // namespace edgeinf::bench_probes
