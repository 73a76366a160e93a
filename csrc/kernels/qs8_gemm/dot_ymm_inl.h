// dot_tile_inl.h's ops over pairs of ymm registers (columns 0-7, 8-15), for a given
// VPDPBUSD: the AVX-VNNI instruction or its AVX2 emulation. Internal linkage, as
// dot_tile_inl.h; include only from files compiled with AVX2 (or more).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace edgeinf::qs8 {
namespace {

template <__m256i (*Dpbusd)(__m256i, __m256i, __m256i)>
struct YmmDot {
  struct Acc {
    __m256i lo, hi;
  };
  using Panel = Acc;
  static Acc load(const int32_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
  }
  static void store(int32_t* p, Acc v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v.lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), v.hi);
  }
  static Acc zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
  static Acc add(Acc x, Acc y) { return {_mm256_add_epi32(x.lo, y.lo), _mm256_add_epi32(x.hi, y.hi)}; }
  static Panel load_panel(const int8_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
  }
  static constexpr bool kRequantizes = false;  // the driver's AVX2 epilogue does
  using Quad = __m256i;
  static Quad broadcast(const uint8_t* quad) {
    int32_t v;
    std::memcpy(&v, quad, sizeof(v));
    return _mm256_set1_epi32(v);
  }
  static Acc dot(Acc acc, Quad a, Panel w) { return {Dpbusd(acc.lo, a, w.lo), Dpbusd(acc.hi, a, w.hi)}; }
};

}  // namespace
}  // namespace edgeinf::qs8
