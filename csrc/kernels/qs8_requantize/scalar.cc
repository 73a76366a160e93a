// Scalar reference of the requantization kernel.
#include "requantize.h"

namespace edgeinf::qs8 {

void qs8_requantize__scalar(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < channels; ++c) out[r * channels + c] = requantize_one(acc[r * channels + c], rq, c);
  }
}

}  // namespace edgeinf::qs8
