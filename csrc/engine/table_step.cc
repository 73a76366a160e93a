#include "table_step.h"

#include <algorithm>
#include <utility>

#include "../dispatch.h"
#include "pool.h"

namespace edgeinf::engine {

namespace {
// Below this many values the step runs on the calling thread: half the elementwise
// steps' threshold (program.cc), as a lookup per value costs about twice a copy's (the
// two-line map's arithmetic about as much). Above it, up to kTasksPerThread tasks per
// thread of at least kMinTaskValues each, as program.cc's elementwise steps: the threads
// that run take over the share of one that is descheduled.
constexpr size_t kMinParallelValues = 16384;
constexpr size_t kMinTaskValues = 8192;
constexpr size_t kTasksPerThread = 4;
}  // namespace

ChannelTableStep::ChannelTableStep(std::string op, std::vector<int8_t> tables, size_t channels, size_t n,
                                   const int8_t* in, int8_t* out, int split)
    : tables_(std::move(tables)),
      lines_(TwoLineMap::fit(tables_.data(), channels, split)),
      name_(lines_ ? op + " (two lines)" : std::move(op)),
      channels_(channels),
      pixels_(n / channels),
      in_(in),
      out_(out) {}

void ChannelTableStep::run_pixels(size_t begin, size_t end) const {
  if (lines_) {
    if (const TwoLineMapKernel lines = two_line_map_simd()) {
      lines(*lines_, in_ + begin * channels_, out_ + begin * channels_, end - begin);
      return;
    }
  }
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

namespace {
// fn(begin, end) over [0, pixels) of `channels` values each, split as the step's comment says.
template <class Fn>
void by_pixels(ThreadPool& pool, size_t pixels, size_t channels, Fn fn) {
  const size_t values = pixels * channels;
  const size_t tasks = values < kMinParallelValues || pool.size() <= 1
                           ? 1
                           : std::min({pool.size() * kTasksPerThread, values / kMinTaskValues, pixels});
  if (tasks <= 1) {
    fn(size_t{0}, pixels);
    return;
  }
  pool.run(tasks, [&](size_t i) { fn(pixels * i / tasks, pixels * (i + 1) / tasks); });
}

// Without a fused kernel, the ADD and the map take turns over this many values at most
// (whole pixels), so that the map reads the sums from L1.
constexpr size_t kAddTableChunkValues = 4096;
}  // namespace

void ChannelTableStep::run(ThreadPool& pool) const {
  by_pixels(pool, pixels_, channels_, [this](size_t b, size_t e) { run_pixels(b, e); });
}

AddTableStep::AddTableStep(std::string op, const qs8::AddParams& p, std::vector<int8_t> tables, size_t channels,
                           size_t n, const int8_t* x, const int8_t* y, int8_t* out, int split)
    : add_(p), table_(op, std::move(tables), channels, n, out, out, split), x_(x), y_(y), out_(out) {}

void AddTableStep::run_pixels(size_t begin, size_t end) const {
  const size_t channels = table_.channels();
  if (add_.linear && table_.lines()) {
    if (const AddTwoLinesKernel fused = add_two_lines_simd()) {
      const size_t at = begin * channels;
      fused(*add_.linear, *table_.lines(), x_ + at, y_ + at, out_ + at, end - begin);
      return;
    }
  }
  const size_t step = std::max<size_t>(1, kAddTableChunkValues / channels);
  for (size_t p = begin; p < end; p += step) {
    const size_t q = std::min(end, p + step);
    qs8::qs8_add_prepared(x_ + p * channels, y_ + p * channels, out_ + p * channels, (q - p) * channels, add_);
    table_.run_pixels(p, q);
  }
}

void AddTableStep::run(ThreadPool& pool) const {
  by_pixels(pool, table_.pixels(), table_.channels(), [this](size_t b, size_t e) { run_pixels(b, e); });
}

}  // namespace edgeinf::engine
