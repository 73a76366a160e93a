#include "pair_table.h"

#include "../dispatch.h"

namespace edgeinf::engine {

void pair_lookup__scalar(const PairTable& table, const int8_t* x, const int8_t* y, int8_t* out, size_t n) {
  const int8_t* t = table.data();  // a local: int8 stores may alias the table's members
  const auto* a = reinterpret_cast<const uint8_t*>(x);
  const auto* b = reinterpret_cast<const uint8_t*>(y);
  for (size_t i = 0; i < n; ++i) out[i] = t[size_t{a[i]} << 8 | b[i]];
}

void pair_lookup(const PairTable& table, const int8_t* x, const int8_t* y, int8_t* out, size_t n) {
  using Fn = void (*)(const PairTable&, const int8_t*, const int8_t*, int8_t*, size_t);
  select<Fn>(&pair_lookup__scalar, EDGEINF_AVX2(pair_lookup__avx2), nullptr, nullptr)(table, x, y, out, n);
}

}  // namespace edgeinf::engine
