// One output row of int8 RESIZE_BILINEAR as TFLite's reference ResizeBilinearInteger:
// each value is the four neighbours weighted in 1/1024 steps, (1024 - wy) * (1024 - wx)
// and so on, summed, rounded half away from zero at 2^20. The four weights sum to 2^20,
// so with int8 values the sum stays within +-2^27 (int32), and the result within int8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgeinf::engine {

struct BilinearRow {
  const int8_t* row0;  // the upper input row (weight 1024 - wy)
  const int8_t* row1;  // the lower one (weight wy)
  int32_t wy;
  const int32_t *x0, *x1, *wx;  // per output column: the two input columns, the weight of x1
  size_t out_w, channels;
};

void bilinear_row__scalar(const BilinearRow& r, int8_t* out);
void bilinear_row__avx2(const BilinearRow& r, int8_t* out);
void bilinear_row__avx512(const BilinearRow& r, int8_t* out);
void bilinear_row__neon(const BilinearRow& r, int8_t* out);
void bilinear_row(const BilinearRow& r, int8_t* out);

// The reference's value of one sum (int64 there; int32 holds it, see above).
inline int8_t bilinear_round(int32_t sum) {
  const int32_t round = sum > 0 ? (1 << 19) : -(1 << 19);
  return static_cast<int8_t>((sum + round) / (1 << 20));
}

}  // namespace edgeinf::engine
