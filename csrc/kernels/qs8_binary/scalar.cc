// Scalar reference add / mul and dispatch.
#include "../../dispatch.h"
#include "binary.h"

namespace edgeinf::qs8 {

void qs8_add__scalar(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  for (size_t i = 0; i < n; ++i) out[i] = add_one(a[i], b[i], p);
}

void qs8_mul__scalar(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  for (size_t i = 0; i < n; ++i) out[i] = mul_one(a[i], b[i], p);
}

void qs8_add(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  using Fn = void (*)(const int8_t*, const int8_t*, int8_t*, size_t, const AddParams&);
  select<Fn>(&qs8_add__scalar, EDGEINF_AVX2(qs8_add__avx2), EDGEINF_NEON(qs8_add__neon),
             EDGEINF_NEON(qs8_add__neon))(a, b, out, n, p);
}

void qs8_mul(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  using Fn = void (*)(const int8_t*, const int8_t*, int8_t*, size_t, const MulParams&);
  select<Fn>(&qs8_mul__scalar, EDGEINF_AVX2(qs8_mul__avx2), EDGEINF_NEON(qs8_mul__neon),
             EDGEINF_NEON(qs8_mul__neon))(a, b, out, n, p);
}

}  // namespace edgeinf::qs8
