#include "prelu.h"

#include "../dispatch.h"

namespace edgeinf::engine {

void prelu__scalar(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels) {
  const size_t channels = p.alpha.size();
  const auto* bytes = reinterpret_cast<const uint8_t*>(in);
  for (size_t i = 0; i < pixels * channels; i += channels) {
    const int8_t* table = p.tables.data();
    for (size_t c = 0; c < channels; ++c, table += 256) out[i + c] = table[bytes[i + c]];
  }
}

void prelu(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels) {
  using Fn = void (*)(const PreluParams&, const int8_t*, int8_t*, size_t);
  const Fn fn =
      select<Fn>(&prelu__scalar, EDGEINF_AVX2(prelu__avx2), EDGEINF_NEON(prelu__neon), EDGEINF_NEON(prelu__neon));
  fn(p, in, out, pixels);
}

}  // namespace edgeinf::engine
