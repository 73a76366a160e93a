#include "narrow_pointwise.h"

#include "../dispatch.h"

namespace edgeinf::engine {

bool NarrowPointwise::applies(const qs8::GemmWeights& w) {
  const Isa isa = active_isa();
  const bool avx2_kernel =
      isa == Isa::kAvx2 || isa == Isa::kAvx2Vnni || isa == Isa::kAvx512Vnni || isa == Isa::kAvx512Amx;
  return w.n() <= kMaxChannels && w.k() >= kMinDepth && !w.requantizes_in_double() && avx2_kernel;
}

NarrowPointwise::NarrowPointwise(const qs8::GemmWeights& w) : w_(w), blocks_((w.k() + 15) / 16) {
  const size_t k = w.k();
  panel_.assign(w.n() * blocks_ * 16, 0);
  for (size_t c = 0; c < w.n(); ++c) {
    for (size_t b = 0; b < blocks_; ++b) {
      const size_t start = block_start(b);
      const size_t covered = b * 16;  // values before this belong to earlier blocks
      for (size_t i = 0; i < 16; ++i) {
        if (start + i >= covered) panel_[(c * blocks_ + b) * 16 + i] = w.weights()[c * k + start + i];
      }
    }
  }
}

void narrow_pointwise__scalar(const NarrowPointwise& nw, const int8_t* in, size_t in_stride, size_t pixels,
                              int8_t* out) {
  const qs8::GemmWeights& w = nw.weights();
  const size_t n = w.n(), k = w.k();
  const int32_t zp = w.input_zero_point();
  for (size_t p = 0; p < pixels; ++p) {
    const int8_t* a = in + p * in_stride;
    for (size_t c = 0; c < n; ++c) {
      const int8_t* wc = w.weights() + c * k;
      uint32_t acc = static_cast<uint32_t>(w.bias()[c]);  // wraps like the compiled reference
      for (size_t i = 0; i < k; ++i) acc += static_cast<uint32_t>(wc[i] * (static_cast<int32_t>(a[i]) - zp));
      out[p * n + c] = w.requantize(static_cast<int32_t>(acc), c);
    }
  }
}

void narrow_pointwise(const NarrowPointwise& w, const int8_t* in, size_t in_stride, size_t pixels, int8_t* out) {
  using Fn = void (*)(const NarrowPointwise&, const int8_t*, size_t, size_t, int8_t*);
  select<Fn>(&narrow_pointwise__scalar, EDGEINF_AVX2(narrow_pointwise__avx2), nullptr, nullptr)(w, in, in_stride,
                                                                                                pixels, out);
}

}  // namespace edgeinf::engine
