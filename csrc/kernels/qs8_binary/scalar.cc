// Scalar reference add / mul.
#include "binary.h"

namespace edgeinf::qs8 {

void qs8_add__scalar(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  for (size_t i = 0; i < n; ++i) out[i] = add_one(a[i], b[i], p);
}

void qs8_mul__scalar(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  for (size_t i = 0; i < n; ++i) out[i] = mul_one(a[i], b[i], p);
}

}  // namespace edgeinf::qs8
