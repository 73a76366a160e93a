// A function of two int8 values as one table of 256 x 256 results, built at load: out[i] =
// table[uint8(x[i]) * 256 + uint8(y[i])]. TFLite's int8 ADD and SUB rescale both inputs and
// their sum with three fixed-point multiplies per value; the table holds their exact
// results for every pair, so running the operator is one lookup per value, bit-exact by
// construction. 64 KiB per operator; the pairs a layer meets cluster near the zero points,
// so the lines it reads mostly stay in the L1 cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgeinf::engine {

class PairTable {
 public:
  static constexpr size_t kEntries = 256 * 256;

  // f(int8 x, int8 y) -> int8, called once per pair.
  template <class F>
  static PairTable of(F f) {
    PairTable t;
    for (int x = -128; x < 128; ++x) {
      for (int y = -128; y < 128; ++y) t.values_[index(x, y)] = f(static_cast<int8_t>(x), static_cast<int8_t>(y));
    }
    return t;
  }

  // The same from a kernel over arrays, kernel(x, y, out, n), run once per value of x.
  template <class Kernel>
  static PairTable of_rows(Kernel kernel) {
    PairTable t;
    int8_t xs[256], ys[256];
    for (int y = -128; y < 128; ++y) ys[static_cast<uint8_t>(y)] = static_cast<int8_t>(y);
    for (int x = -128; x < 128; ++x) {
      for (int8_t& v : xs) v = static_cast<int8_t>(x);
      kernel(xs, ys, t.values_.data() + index(static_cast<int8_t>(x), 0), size_t{256});
    }
    return t;
  }

  static size_t index(int8_t x, int8_t y) { return size_t{static_cast<uint8_t>(x)} << 8 | static_cast<uint8_t>(y); }
  int8_t at(int8_t x, int8_t y) const { return values_[index(x, y)]; }
  // The table; readable 3 bytes past its end (the AVX2 path gathers 4 bytes per entry).
  const int8_t* data() const { return values_.data(); }

 private:
  PairTable() : values_(kEntries + 3, 0) {}
  std::vector<int8_t> values_;
};

// out[i] = table.at(x[i], y[i]) for i in [0, n).
void pair_lookup__scalar(const PairTable& table, const int8_t* x, const int8_t* y, int8_t* out, size_t n);
void pair_lookup__avx2(const PairTable& table, const int8_t* x, const int8_t* y, int8_t* out, size_t n);
void pair_lookup(const PairTable& table, const int8_t* x, const int8_t* y, int8_t* out, size_t n);

}  // namespace edgeinf::engine
