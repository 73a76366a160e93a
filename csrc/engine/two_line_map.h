// A per-channel map of int8 values by two straight lines, the arithmetic form of a
// per-channel lookup table (table_step.h) that SIMD lanes can compute:
//
//   out[p][c] = clamp(floor((m * q + b) / 2^shift), -128, 127),  q = in[p][c],
//   (m, b) = the channel's lower line for q < split, its upper line from split on,
//
// in exact int32 arithmetic (every |m * q + b| stays below 2^30); one shift for all lines,
// the largest of kShifts that lets every line's slope m / 2^shift fit. Consecutive values of
// NHWC data belong to different channels, so a per-channel table costs one scalar lookup
// per value; the lines cost a few vector instructions per 8 values.
//
// A table takes this form only when fit() finds lines that give every one of its entries
// exactly, for all 256 inputs of every channel, so the two forms never differ. A PRELU
// between a DEQUANTIZE and a QUANTIZE is such a table: per channel, round(x * s1) above the
// input zero point and round(x * s2) below it, both straight lines sampled by a rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "../kernels/qs8_binary/binary.h"

namespace edgeinf::engine {

class TwoLineMap {
 public:
  // The shifts fit() tries, finest first: slopes below 4, 32, 256 and 2048.
  static constexpr int kShifts[] = {20, 17, 14, 11};
  // Bounds on the lines that keep m * q + b inside int32 for every int8 q.
  static constexpr int64_t kMaxSlope = int64_t{1} << 22, kMaxIntercept = int64_t{1} << 29;
  // The per-channel lines are stored repeated over this many values at most (a multiple
  // of both the channel count and 32): a map of more channels keeps its table.
  static constexpr size_t kMaxPeriod = 4096;

  struct Line {
    int32_t m = 0, b = 0;
    int8_t at(int32_t q, int shift) const;  // clamp(floor((m * q + b) / 2^shift), -128, 127)
  };

  // The lines that give `tables` ([channels][256], indexed by the input's byte) exactly,
  // the lower ones for inputs below `split` (in [-128, 128]); nullopt when some channel
  // has none.
  static std::optional<TwoLineMap> fit(const int8_t* tables, size_t channels, int split);

  size_t channels() const { return channels_; }
  int split() const { return split_; }
  int shift() const { return shift_; }
  const Line& lower(size_t c) const { return lower_[c]; }
  const Line& upper(size_t c) const { return upper_[c]; }

  // For SIMD paths: the lines' m and b for value i (i % channels's) at index i of each
  // array, for i in [0, period() + 32); period() is a multiple of 32 and of channels().
  size_t period() const { return period_; }
  const int32_t* lower_m() const { return lanes_.data(); }
  const int32_t* lower_b() const { return lanes_.data() + stride(); }
  const int32_t* upper_m() const { return lanes_.data() + 2 * stride(); }
  const int32_t* upper_b() const { return lanes_.data() + 3 * stride(); }

 private:
  TwoLineMap(std::vector<Line> lower, std::vector<Line> upper, int split, int shift);
  size_t stride() const { return period_ + 32; }

  size_t channels_;
  int split_, shift_;
  std::vector<Line> lower_, upper_;
  size_t period_;
  std::vector<int32_t> lanes_;  // lower m, lower b, upper m, upper b: stride() values each
};

// pixels x channels values. The scalar variant is the reference (fit() proves the lines
// with it); the SIMD ones give its results bit for bit.
void two_line_map__scalar(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels);
void two_line_map__avx2(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels);
void two_line_map__avx512(const TwoLineMap& map, const int8_t* in, int8_t* out, size_t pixels);

// The SIMD variant of the active path, or null where there is none (the scalar arithmetic
// is slower than a table lookup, so callers keep their table there).
using TwoLineMapKernel = void (*)(const TwoLineMap&, const int8_t*, int8_t*, size_t);
TwoLineMapKernel two_line_map_simd();

// ADD's linear form of x and y (binary.h), clamped to its activation range, then the map:
// both steps' results in one pass (table_step.h's AddTableStep). The active path's
// variant, or null where there is none.
using AddTwoLinesKernel = void (*)(const qs8::AddLinear&, const TwoLineMap&, const int8_t* x, const int8_t* y,
                                   int8_t* out, size_t pixels);
void add_two_lines__avx512(const qs8::AddLinear& add, const TwoLineMap& map, const int8_t* x, const int8_t* y,
                           int8_t* out, size_t pixels);
AddTwoLinesKernel add_two_lines_simd();

}  // namespace edgeinf::engine
