// PRELU on aarch64: the scalar path's per-channel tables (prelu.h), looked up 8 channels at
// a time through 64-bit words as the per-channel table step does (table_step__neon.cc):
// fewer instructions per value than the fixed-point formula on NEON lanes.
#include "prelu.h"
#include "table_step.h"

namespace edgeinf::engine {

void prelu__neon(const PreluParams& p, const int8_t* in, int8_t* out, size_t pixels) {
  channel_lookup__neon(p.tables.data(), p.alpha.size(), reinterpret_cast<const uint8_t*>(in), out, pixels);
}

}  // namespace edgeinf::engine
