// A benchmark probe, not part of a pass: loads every byte of the listed rows of a plane,
// in the given order, and nothing else. Its time is a lower bound for any resize that
// reads those rows (benchmarks/bench_preprocess.py reports the passes against it).
#include <cstring>

#include "image_to_tensor.h"

namespace edgeinf::preprocess {

uint64_t read_rows_probe(const uint8_t* plane, size_t row_stride, size_t row_bytes, const int64_t* rows, size_t n) {
  // Four independent OR chains over 8-byte words: the compiler vectorizes them, and the
  // loads cannot be dropped because the result depends on every byte.
  uint64_t acc[4] = {0, 0, 0, 0};
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* row = plane + static_cast<size_t>(rows[r]) * row_stride;
    size_t i = 0;
    for (; i + 32 <= row_bytes; i += 32) {
      uint64_t w[4];
      std::memcpy(w, row + i, 32);
      for (int k = 0; k < 4; ++k) acc[k] |= w[k];
    }
    for (; i < row_bytes; ++i) acc[0] |= row[i];
  }
  return acc[0] | acc[1] | acc[2] | acc[3];
}

}  // namespace edgeinf::preprocess
