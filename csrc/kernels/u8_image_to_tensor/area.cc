// Scalar reference of the area resampling's multi-row vertical accumulation.
#include "image_to_tensor.h"

namespace edgeinf::preprocess {

// Column by column, the same exact integer sums as `count` calls of u8_accumulate__scalar:
// every term is at most 255 * 2^11 and the weights of one output row sum to 2^11, so acc
// stays below 2^31 in any order of addition.
void u8_accumulate_rows__scalar(const uint8_t* const* rows, const int32_t* w, int count, int begin, int end,
                                int32_t* acc, bool init) {
  for (int i = begin; i < end; ++i) {
    int32_t sum = init ? 0 : acc[i];
    for (int k = 0; k < count; ++k) sum += w[k] * rows[k][i];
    acc[i] = sum;
  }
}

}  // namespace edgeinf::preprocess
