#include "table_step.h"

#include <algorithm>
#include <utility>

#include "pool.h"

namespace edgeinf::engine {

namespace {
// Below this many values the step runs on the calling thread.
constexpr size_t kMinParallelValues = 32768;
}  // namespace

ChannelTableStep::ChannelTableStep(std::string op, std::vector<int8_t> tables, size_t channels, size_t n,
                                   const int8_t* in, int8_t* out)
    : op_(std::move(op)), tables_(std::move(tables)), channels_(channels), pixels_(n / channels), in_(in), out_(out) {}

void ChannelTableStep::run_pixels(size_t begin, size_t end) const {
  const auto* bytes = reinterpret_cast<const uint8_t*>(in_);
  for (size_t i = begin * channels_; i < end * channels_; i += channels_) {
    const int8_t* table = tables_.data();
    for (size_t c = 0; c < channels_; ++c, table += 256) out_[i + c] = table[bytes[i + c]];
  }
}

void ChannelTableStep::run(ThreadPool& pool) const {
  const size_t chunks = pixels_ * channels_ < kMinParallelValues ? 1 : pool.size();
  if (chunks <= 1) {
    run_pixels(0, pixels_);
    return;
  }
  const size_t step = (pixels_ + chunks - 1) / chunks;
  pool.run(chunks, [&](size_t i) { run_pixels(std::min(pixels_, i * step), std::min(pixels_, (i + 1) * step)); });
}

}  // namespace edgeinf::engine
