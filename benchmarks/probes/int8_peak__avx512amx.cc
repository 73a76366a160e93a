// The int8 multiply-add peak of an AMX core: TDPBUSD into four independent 16x16 int32
// tiles from A and B tiles loaded once (16 rows of 64 bytes), the shape of the GEMM's
// blocks (csrc/kernels/qs8_gemm/avx512amx.cc) with its loads left out.
#include <immintrin.h>

#include "probes.h"

namespace edgeinf::bench_probes {

uint64_t int8_peak__avx512amx(size_t iterations) {
  struct alignas(64) {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } config;
  alignas(64) static uint8_t operand[16 * 64];
  for (size_t i = 0; i < sizeof(operand); ++i) operand[i] = static_cast<uint8_t>(i % 7);
  _tile_loadconfig(&config);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (size_t i = 0; i < iterations; ++i) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  alignas(64) int32_t sink[16 * 16];
  _tile_stored(0, sink, 64);
  _tile_release();
  __asm__ volatile("" : : "r"(sink[0]) : "memory");
  return static_cast<uint64_t>(iterations) * 4 * (16 * 16 * 64) * 2;  // 16384 multiply-adds per TDPBUSD
}

}  // namespace edgeinf::bench_probes
