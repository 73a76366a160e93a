// A per-channel lookup table: out[p][c] = tables[c][uint8(in[p][c])], one 256-entry table
// per channel of the last axis, built at load. It runs any map of one int8/uint8 value that
// depends on its channel, e.g. a float PRELU with per-channel alpha between a DEQUANTIZE
// and a QUANTIZE (the whole float chain folds into the tables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "program.h"

namespace edgeinf::engine {

class ChannelTableStep final : public Step {
 public:
  // tables: channels * 256 bytes; n: a multiple of channels (checked by the caller).
  ChannelTableStep(std::string op, std::vector<int8_t> tables, size_t channels, size_t n, const int8_t* in,
                   int8_t* out);
  void run(ThreadPool& pool) const override;
  const char* name() const override { return op_.c_str(); }

 private:
  void run_pixels(size_t begin, size_t end) const;

  std::string op_;
  std::vector<int8_t> tables_;
  size_t channels_, pixels_;
  const int8_t* in_;
  int8_t* out_;
};

// The lookups of `pixels` pixels on aarch64 (table_step__neon.cc): tables as the step's.
void channel_lookup__neon(const int8_t* tables, size_t channels, const uint8_t* in, int8_t* out, size_t pixels);

}  // namespace edgeinf::engine
