// A per-channel lookup table: out[p][c] = tables[c][uint8(in[p][c])], one 256-entry table
// per channel of the last axis, built at load. It runs any map of one int8/uint8 value that
// depends on its channel, e.g. a float PRELU with per-channel alpha between a DEQUANTIZE
// and a QUANTIZE (the whole float chain folds into the tables). Where the tables are two
// straight lines per channel (two_line_map.h), as a PRELU's are, SIMD paths compute the
// lines instead of looking each value up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "program.h"
#include "two_line_map.h"

namespace edgeinf::engine {

class ChannelTableStep final : public Step {
 public:
  // tables: channels * 256 bytes; n: a multiple of channels (checked by the caller);
  // split: where the lines of a two-line map would meet (the input zero point of a PRELU),
  // in [-128, 128].
  ChannelTableStep(std::string op, std::vector<int8_t> tables, size_t channels, size_t n, const int8_t* in, int8_t* out,
                   int split = -128);
  void run(ThreadPool& pool) const override;
  // The operators, and "(two lines)" where the step may compute them as lines.
  const char* name() const override { return name_.c_str(); }

 private:
  void run_pixels(size_t begin, size_t end) const;

  std::vector<int8_t> tables_;
  std::optional<TwoLineMap> lines_;  // the tables as lines, where they are
  std::string name_;
  size_t channels_, pixels_;
  const int8_t* in_;
  int8_t* out_;
};

// The lookups of `pixels` pixels on aarch64 (table_step__neon.cc): tables as the step's.
void channel_lookup__neon(const int8_t* tables, size_t channels, const uint8_t* in, int8_t* out, size_t pixels);

}  // namespace edgeinf::engine
