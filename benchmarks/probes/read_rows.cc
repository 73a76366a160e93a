// The row-read probe: loads every byte of the listed rows of a plane, in the given order,
// and nothing else. It reads as fast as a preprocessing pass can: 16-byte vector loads,
// four independent OR chains, and the row two ahead prefetched (which the passes do too;
// without it the loads run about 30% slower). bench_preprocess.py reports the passes
// against it.
#include <cstring>

#include "probes.h"

namespace edgeinf::bench_probes {

namespace {
typedef uint64_t u64x2 __attribute__((vector_size(16)));  // SSE2 / NEON register
constexpr size_t kPrefetchRows = 2;
}  // namespace

uint64_t read_rows(const uint8_t* plane, size_t row_stride, size_t row_bytes, const int64_t* rows, size_t n) {
  u64x2 acc[4] = {};
  uint64_t tail = 0;  // then the OR of every byte
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* row = plane + static_cast<size_t>(rows[r]) * row_stride;
    const uint8_t* ahead =
        r + kPrefetchRows < n ? plane + static_cast<size_t>(rows[r + kPrefetchRows]) * row_stride : nullptr;
    size_t i = 0;
    for (; i + 64 <= row_bytes; i += 64) {
      if (ahead) __builtin_prefetch(ahead + i);
      for (int k = 0; k < 4; ++k) {
        u64x2 v;
        std::memcpy(&v, row + i + 16 * k, 16);
        acc[k] |= v;
      }
    }
    for (; i < row_bytes; ++i) tail |= row[i];
  }
  const u64x2 all = acc[0] | acc[1] | acc[2] | acc[3];
  uint64_t word = all[0] | all[1];
  for (int b = 0; b < 8; ++b) tail |= (word >> (8 * b)) & 0xFF;
  return tail;
}

}  // namespace edgeinf::bench_probes
