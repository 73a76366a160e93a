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

#include "../kernels/qs8_binary/binary.h"
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
  // Maps pixels [begin, end) (in and out may be the same memory).
  void run_pixels(size_t begin, size_t end) const;
  // The tables as lines, where they are; null otherwise.
  const TwoLineMap* lines() const { return lines_ ? &*lines_ : nullptr; }
  size_t channels() const { return channels_; }
  size_t pixels() const { return pixels_; }

 private:
  std::vector<int8_t> tables_;
  std::optional<TwoLineMap> lines_;  // the tables as lines, where they are
  std::string name_;
  size_t channels_, pixels_;
  const int8_t* in_;
  int8_t* out_;
};

// An ADD of two equal-shape tensors whose sum only a per-channel table reads (a float PRELU
// after a residual ADD): one step, so the sums are mapped before they leave the cache, or
// on the avx512vnni path, where the ADD has its linear form and the tables are two lines,
// before they leave the registers. Results equal the two steps run one after the other.
class AddTableStep final : public Step {
 public:
  // tables, channels, n, split: as ChannelTableStep's; x, y: the ADD's inputs, n values each.
  AddTableStep(std::string op, const qs8::AddParams& p, std::vector<int8_t> tables, size_t channels, size_t n,
               const int8_t* x, const int8_t* y, int8_t* out, int split);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return table_.name(); }

 private:
  void run_pixels(size_t begin, size_t end) const;

  qs8::PreparedAdd add_;
  ChannelTableStep table_;  // maps the sums in place, in out_
  const int8_t *x_, *y_;
  int8_t* out_;
};

// The lookups of `pixels` pixels on aarch64 (table_step__neon.cc): tables as the step's.
void channel_lookup__neon(const int8_t* tables, size_t channels, const uint8_t* in, int8_t* out, size_t pixels);

}  // namespace edgeinf::engine
