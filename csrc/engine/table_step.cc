#include "table_step.h"

#include <algorithm>
#include <utility>

#include "../dispatch.h"
#include "pool.h"

namespace edgeinf::engine {

namespace {
// Below this many values the step runs on the calling thread: half the elementwise
// steps' threshold (program.cc), as a lookup per value costs about twice a copy's.
constexpr size_t kMinParallelValues = 16384;
}  // namespace

ChannelTableStep::ChannelTableStep(std::string op, std::vector<int8_t> tables, size_t channels, size_t n,
                                   const int8_t* in, int8_t* out)
    : op_(std::move(op)), tables_(std::move(tables)), channels_(channels), pixels_(n / channels), in_(in), out_(out) {}

void ChannelTableStep::run_pixels(size_t begin, size_t end) const {
  // Locals, not members: every int8 store may alias any object, so through `this` the
  // compiler would reload the pointers and the channel count after each value.
  const size_t channels = channels_;
  const uint8_t* in = reinterpret_cast<const uint8_t*>(in_) + begin * channels;
  int8_t* out = out_ + begin * channels;
  const int8_t* tables = tables_.data();
  using Fn = void (*)(const int8_t*, size_t, const uint8_t*, int8_t*, size_t);
  if (Fn fn = select<Fn>(nullptr, nullptr, EDGEINF_NEON(channel_lookup__neon), EDGEINF_NEON(channel_lookup__neon))) {
    return fn(tables, channels, in, out, end - begin);
  }
  for (size_t p = begin; p < end; ++p, in += channels, out += channels) {
    size_t c = 0;
    for (; c + 4 <= channels; c += 4) {
      const int8_t a = tables[(c + 0) * 256 + in[c + 0]];
      const int8_t b = tables[(c + 1) * 256 + in[c + 1]];
      const int8_t d = tables[(c + 2) * 256 + in[c + 2]];
      const int8_t e = tables[(c + 3) * 256 + in[c + 3]];
      out[c + 0] = a;
      out[c + 1] = b;
      out[c + 2] = d;
      out[c + 3] = e;
    }
    for (; c < channels; ++c) out[c] = tables[c * 256 + in[c]];
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
