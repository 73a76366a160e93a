// Scalar reference GEMM: TFLite's reference loop, one output at a time.
#include "gemm.h"

namespace edgeinf::qs8 {

void qs8_gemm__scalar(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  const size_t n = w.n(), k = a.k();
  const int32_t zp = w.input_zero_point();
  for (size_t m = 0; m < a.m; ++m) {
    const int8_t* const* seg = a.ptrs + m * a.taps;
    for (size_t c = 0; c < n; ++c) {
      const int8_t* wc = w.weights() + c * k;
      // int32 accumulation that wraps like the compiled reference.
      uint32_t acc = static_cast<uint32_t>(w.bias()[c]);
      for (size_t t = 0; t < a.taps; ++t) {
        for (size_t i = 0; i < a.seg; ++i) {
          const int32_t x = static_cast<int32_t>(seg[t][i]) - zp;
          acc += static_cast<uint32_t>(static_cast<int32_t>(wc[t * a.seg + i]) * x);
        }
      }
      out[m * out_stride + c] = w.requantize(static_cast<int32_t>(acc), c);
    }
  }
}

}  // namespace edgeinf::qs8
