// Size arithmetic that refuses to wrap. Every size derived from an argument or a file goes
// through it before it is compared with a buffer or allocated: a product that wraps
// modulo 2^64 could otherwise match a small buffer and let a kernel run past it.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace edgeinf {

// The error of a size that would wrap: `what`: a op b does not fit in memory.
[[noreturn]] inline void throw_does_not_fit(const char* what, size_t a, const char* op, size_t b) {
  throw std::invalid_argument(std::string(what) + ": " + std::to_string(a) + op + std::to_string(b) +
                              " does not fit in memory");
}

// a * b, or std::invalid_argument naming `what` when it does not fit size_t.
inline size_t mul_size(size_t a, size_t b, const char* what) {
  size_t product;
  if (__builtin_mul_overflow(a, b, &product)) throw_does_not_fit(what, a, " x ", b);
  return product;
}

// a + b, or std::invalid_argument naming `what`.
inline size_t add_size(size_t a, size_t b, const char* what) {
  size_t sum;
  if (__builtin_add_overflow(a, b, &sum)) throw_does_not_fit(what, a, " + ", b);
  return sum;
}

// The product of all factors, checked.
inline size_t product_size(std::initializer_list<size_t> factors, const char* what) {
  size_t product = 1;
  for (size_t f : factors) product = mul_size(product, f, what);
  return product;
}

}  // namespace edgeinf
