#include "resize_bilinear.h"

#include "../dispatch.h"

namespace edgeinf::engine {

void bilinear_row__scalar(const BilinearRow& r, int8_t* out) {
  const int32_t wy = r.wy;
  for (size_t ox = 0; ox < r.out_w; ++ox) {
    const int32_t wx = r.wx[ox];
    const int32_t w00 = (1024 - wy) * (1024 - wx), w10 = wy * (1024 - wx), w01 = (1024 - wy) * wx, w11 = wy * wx;
    const size_t x0 = static_cast<size_t>(r.x0[ox]) * r.channels, x1 = static_cast<size_t>(r.x1[ox]) * r.channels;
    for (size_t c = 0; c < r.channels; ++c) {
      *out++ =
          bilinear_round(r.row0[x0 + c] * w00 + r.row1[x0 + c] * w10 + r.row0[x1 + c] * w01 + r.row1[x1 + c] * w11);
    }
  }
}

void bilinear_row(const BilinearRow& r, int8_t* out) {
  using Fn = void (*)(const BilinearRow&, int8_t*);
  VnniVariants<Fn> avx512;  // the AVX-512 variant rides on the avx512vnni path
  avx512.avx512vnni = EDGEINF_AVX512VNNI(bilinear_row__avx512);
  select<Fn>(&bilinear_row__scalar, EDGEINF_AVX2(bilinear_row__avx2), EDGEINF_NEON(bilinear_row__neon),
             EDGEINF_NEON(bilinear_row__neon), avx512)(r, out);
}

}  // namespace edgeinf::engine
