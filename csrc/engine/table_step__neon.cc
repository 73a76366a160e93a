// Per-channel table lookups on aarch64 (table_step.h), 8 channels at a time through 64-bit
// words. NEON has no gather, and its byte lookups (TBL) reach 64 entries, so four of them
// per 256-entry table, one table per lane: slower than general registers. Here the eight
// inputs of a pixel are loaded as one word, each byte indexes its channel's table through
// a base register per channel, and the eight results are assembled into one stored word:
// about three instructions and one load per value, where the plain loop takes two loads,
// a store and an address add.
#include <algorithm>
#include <cstring>

#include "table_step.h"

namespace edgeinf::engine {

namespace {

// Pixels per pass over the channel blocks: their values (up to a few KiB) stay in L1.
constexpr size_t kPixelsPerPass = 64;

}  // namespace

void channel_lookup__neon(const int8_t* tables, size_t channels, const uint8_t* in, int8_t* out, size_t pixels) {
  const size_t full = channels / 8 * 8;
  for (size_t p0 = 0; p0 < pixels; p0 += kPixelsPerPass) {
    const size_t p1 = std::min(pixels, p0 + kPixelsPerPass);
    for (size_t c0 = 0; c0 < full; c0 += 8) {
      const uint8_t* t[8];
      for (size_t j = 0; j < 8; ++j) t[j] = reinterpret_cast<const uint8_t*>(tables) + (c0 + j) * 256;
      const uint8_t* src = in + p0 * channels + c0;
      int8_t* dst = out + p0 * channels + c0;
      for (size_t p = p0; p < p1; ++p, src += channels, dst += channels) {
        uint64_t word;
        std::memcpy(&word, src, 8);
        uint64_t result = 0;
#pragma GCC unroll 8
        for (unsigned j = 0; j < 8; ++j) result |= uint64_t{t[j][(word >> (8 * j)) & 0xff]} << (8 * j);
        std::memcpy(dst, &result, 8);
      }
    }
    for (size_t p = p0; p < p1; ++p) {
      for (size_t c = full; c < channels; ++c) out[p * channels + c] = tables[c * 256 + in[p * channels + c]];
    }
  }
}

}  // namespace edgeinf::engine
