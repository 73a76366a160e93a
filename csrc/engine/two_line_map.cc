#include "two_line_map.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "../dispatch.h"

namespace edgeinf::engine {

int8_t TwoLineMap::Line::at(int32_t q, int shift) const {
  const int32_t y = (m * q + b) >> shift;  // arithmetic shift: the floor
  return static_cast<int8_t>(std::min(127, std::max(-128, y)));
}

namespace {

constexpr int64_t kUnbounded = int64_t{1} << 50;  // beyond any m * q + b of a line

int8_t entry(const int8_t* table, int q) { return table[static_cast<uint8_t>(q)]; }

// A line through the entries of `table` for q in [lo, hi]: m and b with
//   lower(q) <= m * q + b <= upper(q),  lower = t * 2^shift, upper = lower + 2^shift - 1
// for each entry t (no lower bound for t = -128 and no upper one for t = 127: the clamp
// gives those from any smaller or larger value). For a given m the best b is the largest
// lower(q) - m * q, feasible when it is at most the smallest upper(q') - m * q'. When not,
// that pair of entries bounds m: m * (q' - q) <= upper(q') - lower(q), from above for
// q' > q and from below for q' < q; a bound is necessary, so moving m to it never passes
// a feasible m, and m moving both ways means there is none. Each move satisfies the pair
// that bounded it, so the moves end after a few steps.
std::optional<TwoLineMap::Line> fit_line(const int8_t* table, int lo, int hi, int shift) {
  if (lo > hi) return TwoLineMap::Line{};
  auto lower = [&](int q) {
    const int64_t t = entry(table, q);
    return t == -128 ? -kUnbounded : t * (int64_t{1} << shift);
  };
  auto upper = [&](int q) {
    const int64_t t = entry(table, q);
    return t == 127 ? kUnbounded : (t + 1) * (int64_t{1} << shift) - 1;
  };
  int64_t m = 0;
  if (hi > lo) {
    // Start from the slope between the ends.
    m = (int64_t{entry(table, hi)} - entry(table, lo)) * (int64_t{1} << shift) / (hi - lo);
  }
  int direction = 0;  // +1 once m moved up, -1 once down
  for (int step = 0; step < 256; ++step) {
    // The largest lower(q) - m * q and the smallest upper(q) - m * q, over the bounded ones.
    bool floored = false, ceiled = false;
    int64_t b = 0, ceiling = 0;
    int at_b = lo, at_ceiling = lo;
    for (int q = lo; q <= hi; ++q) {
      const int64_t l = lower(q), u = upper(q);
      if (l != -kUnbounded && (!floored || l - m * q > b)) floored = true, b = l - m * q, at_b = q;
      if (u != kUnbounded && (!ceiled || u - m * q < ceiling)) ceiled = true, ceiling = u - m * q, at_ceiling = q;
    }
    if (!floored || !ceiled || b <= ceiling) {
      if (!floored) b = ceiling;  // every entry is -128: any b at or below the ceiling
      if (std::abs(m) > TwoLineMap::kMaxSlope || std::abs(b) > TwoLineMap::kMaxIntercept) return std::nullopt;
      return TwoLineMap::Line{static_cast<int32_t>(m), static_cast<int32_t>(b)};
    }
    // lower(at_b) - m * at_b > upper(at_ceiling) - m * at_ceiling: the pair bounds m by
    // m * span <= room.
    const int64_t room = upper(at_ceiling) - lower(at_b);
    const int64_t span = at_ceiling - at_b;  // not 0: lower(q) <= upper(q)
    int64_t next;
    if (span > 0) {  // m <= room / span, rounded down
      next = room >= 0 ? room / span : -((-room + span - 1) / span);
      if (direction > 0) return std::nullopt;
      direction = -1;
    } else {  // m >= room / span = -room / -span, rounded up
      const int64_t num = -room, den = -span;
      next = num >= 0 ? (num + den - 1) / den : -(-num / den);
      if (direction < 0) return std::nullopt;
      direction = 1;
    }
    m = next;
  }
  return std::nullopt;
}

}  // namespace

TwoLineMap::TwoLineMap(std::vector<Line> lower, std::vector<Line> upper, int split, int shift)
    : channels_(lower.size()), split_(split), shift_(shift), lower_(std::move(lower)), upper_(std::move(upper)) {
  period_ = std::lcm(channels_, size_t{32});
  lanes_.resize(4 * stride());
  for (size_t i = 0; i < stride(); ++i) {
    const size_t c = i % channels_;
    lanes_[i] = lower_[c].m;
    lanes_[stride() + i] = lower_[c].b;
    lanes_[2 * stride() + i] = upper_[c].m;
    lanes_[3 * stride() + i] = upper_[c].b;
  }
}

std::optional<TwoLineMap> TwoLineMap::fit(const int8_t* tables, size_t channels, int split) {
  if (channels == 0 || std::lcm(channels, size_t{32}) > kMaxPeriod || split < -128 || split > 128) {
    return std::nullopt;
  }
  // Every input value in every channel: pixel p holds p - 128 throughout.
  std::vector<int8_t> every(256 * channels), got(256 * channels);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int8_t>(static_cast<int>(i / channels) - 128);
  for (const int shift : kShifts) {
    std::vector<Line> lower(channels), upper(channels);
    bool found = true;
    for (size_t c = 0; c < channels && found; ++c) {
      const int8_t* table = tables + c * 256;
      const auto below = fit_line(table, -128, split - 1, shift), above = fit_line(table, split, 127, shift);
      found = below && above;
      if (found) lower[c] = *below, upper[c] = *above;
    }
    if (!found) continue;
    TwoLineMap map(std::move(lower), std::move(upper), split, shift);
    // The proof: the reference arithmetic gives every entry of every table.
    two_line_map__scalar(map, every.data(), got.data(), 256);
    bool equal = true;
    for (size_t i = 0; i < got.size() && equal; ++i)
      equal = got[i] == tables[i % channels * 256 + (i / channels + 128) % 256];
    if (equal) return map;
  }
  return std::nullopt;
}

void two_line_map__scalar(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels) {
  const size_t channels = map.channels();
  const int split = map.split(), shift = map.shift();
  for (size_t p = 0; p < pixels; ++p, in += channels, out += channels) {
    for (size_t c = 0; c < channels; ++c) {
      const int32_t q = in[c];
      out[c] = (q < split ? map.lower(c) : map.upper(c)).at(q, shift);
    }
  }
}

TwoLineMapKernel two_line_map_simd() {
  VnniVariants<TwoLineMapKernel> avx512;  // the AVX-512 variant rides on the avx512vnni path
  avx512.avx512vnni = EDGEINF_AVX512VNNI(two_line_map__avx512);
  return select<TwoLineMapKernel>(nullptr, EDGEINF_AVX2(two_line_map__avx2), nullptr, nullptr, avx512);
}

AddTwoLinesKernel add_two_lines_simd() {
  VnniVariants<AddTwoLinesKernel> avx512;
  avx512.avx512vnni = EDGEINF_AVX512VNNI(add_two_lines__avx512);
  return select<AddTwoLinesKernel>(nullptr, nullptr, nullptr, nullptr, avx512);
}

}  // namespace edgeinf::engine
