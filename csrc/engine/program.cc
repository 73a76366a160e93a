#include "program.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "../kernels/qs8_logistic/logistic.h"
#include "../kernels/qs8_quantize/quantize.h"
#include "resize_bilinear.h"
#include "steps.h"

namespace edgeinf::engine {

void Program::FreeAligned::operator()(uint8_t* p) const { std::free(p); }

Program::Program(size_t arena_bytes, size_t threads) : arena_bytes_(arena_bytes) {
  if (threads == 0 || threads > kMaxThreads) {
    throw std::invalid_argument("engine threads must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                                std::to_string(threads));
  }
  if (arena_bytes > kMaxArenaBytes) {
    throw std::invalid_argument("engine arena of " + std::to_string(arena_bytes) + " bytes exceeds the limit of " +
                                std::to_string(kMaxArenaBytes));
  }
  const size_t rounded = (arena_bytes + kAlignment - 1) / kAlignment * kAlignment + kAlignment;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, rounded));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  arena_.reset(p);
  pool_ = std::make_unique<ThreadPool>(threads);
}

uint8_t* Program::span(size_t offset, size_t bytes, const char* what) {
  if (offset > arena_bytes_ || bytes > arena_bytes_ - offset) {
    throw std::invalid_argument(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                                std::to_string(offset + bytes) + ") lie outside the arena of " +
                                std::to_string(arena_bytes_) + " bytes");
  }
  return arena_.get() + offset;
}

void Program::run() const {
  pool_->begin_run();
  for (const auto& step : steps_) step->run(*pool_);
  pool_->end_run();
}

std::vector<double> Program::profile(size_t runs) const {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> times(steps_.size(), std::vector<double>(runs));
  for (size_t r = 0; r < runs; ++r) {
    pool_->begin_run(false);  // every step split as in a run with the workers
    for (size_t i = 0; i < steps_.size(); ++i) {
      const auto start = Clock::now();
      steps_[i]->run(*pool_);
      times[i][r] = std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  std::vector<double> medians;
  for (auto& t : times) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    medians.push_back(t.empty() ? 0.0 : t[t.size() / 2]);
  }
  return medians;
}

// ---------------------------------------------------------------- steps

namespace {

// Below this many multiply-adds a layer runs on the calling thread: handing out its tasks
// and the second thread's share of the caches cost more than splitting a layer of under
// about 10 microseconds saves (the workers are awake between a model's steps, pool.cc).
constexpr size_t kMinParallelMacs = 400000;
// A parallel layer is cut into up to this many tasks per thread, each of at least
// kMinTaskMacs: on a machine other jobs share, a worker is often descheduled mid-layer,
// and small tasks let the threads that do run take over its share instead of waiting
// for it (tasks are claimed one at a time).
constexpr size_t kTasksPerThread = 4;
constexpr size_t kMinTaskMacs = 100000;
// A depthwise multiply-add takes about as long as this many of a convolution's (no sum
// over input channels to share each load and requantization), measured on Zen 3: the
// thresholds above count depthwise layers' work in convolution multiply-adds.
constexpr size_t kDepthwiseMacCost = 2;
// A convolution of fewer output rows than this also gets its output channels cut into up
// to kMaxTiles tiles of whole kTileChannelBlock blocks (the SIMD kernels' channel block),
// run as tasks when its rows are too few to go round the threads.
constexpr size_t kMaxTileRows = 8;
constexpr size_t kMaxTiles = 8;
constexpr size_t kTileChannelBlock = 16;
// Elementwise, data-movement, pooling and resize steps split above this many values (a
// pooling's output values times its window's taps), in chunks of at least kMinChunkValues.
constexpr size_t kMinParallelValues = 32768;
constexpr size_t kMinChunkValues = 8192;
// ADD and MUL on the vector kernels take about this many times a copy's time per value
// (three or one fixed-point multiplies per value), measured on Zen 3.
constexpr size_t kArithmeticValueCost = 4;

// Output rows [r0, r1) of image 0 of a convolution as a layer of their own: the input
// rows they read (clipped to the image), the padding above them, their output rows.
// False when they read only padding (the caller then runs the whole layer at once).
template <class Geometry>
bool slice_rows(const Geometry& g, size_t out_c, size_t r0, size_t r1, Geometry* s, size_t* in_skip, size_t* out_skip) {
  const ptrdiff_t first = static_cast<ptrdiff_t>(r0 * g.stride_h) - g.pad_top;
  const ptrdiff_t last = static_cast<ptrdiff_t>((r1 - 1) * g.stride_h + (g.k_h - 1) * g.dilation_h) - g.pad_top;
  const ptrdiff_t lo = std::max<ptrdiff_t>(first, 0);
  const ptrdiff_t hi = std::min<ptrdiff_t>(last, static_cast<ptrdiff_t>(g.in_h) - 1);
  if (hi < lo) return false;
  *s = g;
  s->in_h = static_cast<size_t>(hi - lo + 1);
  s->pad_top = lo - first;
  s->out_h = r1 - r0;
  *in_skip = static_cast<size_t>(lo) * g.in_w * g.in_c;
  *out_skip = r0 * g.out_w * out_c;
  return true;
}

// Bounds of bands over rows [0, n): bounds[0] = 0 < ... < bounds[count] = n. The bands are
// cut alternately from the front and the back, each a quarter of the rows left (at least
// min_rows), so they shrink toward the middle. The pool's caller claims bands from the
// front and its workers from the back (pool.h): the bands taken last are the smallest, and
// the threads end a layer close together instead of one waiting out a whole band.
struct Bands {
  static constexpr size_t kMax = 64;
  std::array<size_t, kMax + 1> bounds;
  size_t count = 0;
  Bands(size_t n, size_t min_rows) {
    std::array<size_t, kMax> front{}, back{};
    size_t fronts = 0, backs = 0, left = n;
    while (left > 0) {
      size_t piece = std::max(min_rows, (left + 3) / 4);
      if (piece >= left || fronts + backs + 1 == kMax) piece = left;
      (fronts <= backs ? front[fronts++] : back[backs++]) = piece;
      left -= piece;
    }
    bounds[0] = 0;
    for (size_t i = 0; i < fronts; ++i, ++count) bounds[count + 1] = bounds[count] + front[i];
    for (size_t i = backs; i-- > 0; ++count) bounds[count + 1] = bounds[count] + back[i];
  }
};

// Runs kernel(slice geometry, in, out) over bands of output rows on the pool's threads,
// or once over the whole layer when it is small, batched, or cannot be cut. A band holds
// at least kMinTaskMacs of work.
template <class Geometry, class Kernel>
void by_row_bands(ThreadPool& pool, const Geometry& g, size_t out_c, size_t macs, const int8_t* in, int8_t* out,
                  Kernel kernel) {
  if (pool.size() <= 1 || g.out_h <= 1 || g.batch != 1 || macs < kMinParallelMacs) {
    kernel(g, in, out);
    return;
  }
  const Bands bands(g.out_h, std::max<size_t>(1, (g.out_h * kMinTaskMacs + macs - 1) / macs));
  Geometry slice;
  size_t in_skip = 0, out_skip = 0;
  for (size_t i = 0; i < bands.count; ++i) {
    if (bands.count <= 1 || !slice_rows(g, out_c, bands.bounds[i], bands.bounds[i + 1], &slice, &in_skip, &out_skip)) {
      kernel(g, in, out);
      return;
    }
  }
  pool.run(bands.count, [&](size_t i) {
    Geometry s = g;
    size_t in_at = 0, out_at = 0;
    slice_rows(g, out_c, bands.bounds[i], bands.bounds[i + 1], &s, &in_at, &out_at);
    kernel(s, in + in_at, out + out_at);
  });
}

// fn(begin, end) over [0, n) in up to kTasksPerThread chunks per thread (multiples of 64
// values), or at once when n is small or the pool has no workers. `cost` weighs a value
// against a copied one in the thresholds: ADD's arithmetic costs several times a copy.
template <class Fn>
void by_chunks(ThreadPool& pool, size_t n, Fn fn, size_t cost = 1) {
  const size_t work = n * cost;
  const size_t chunks = work < kMinParallelValues || pool.size() <= 1
                            ? 1
                            : std::min({pool.size() * kTasksPerThread, work / kMinChunkValues, n / 64});
  if (chunks <= 1) {
    fn(size_t{0}, n);
    return;
  }
  const size_t step = (n / chunks + 63) / 64 * 64;
  pool.run(chunks, [&](size_t i) {
    const size_t begin = std::min(n, i * step), end = i + 1 == chunks ? n : std::min(n, (i + 1) * step);
    if (begin < end) fn(begin, end);
  });
}

// fn(begin, end) over rows [0, rows) of values_per_row values each, in up to
// kTasksPerThread bands of rows per thread, or at once when the rows hold few values.
template <class Fn>
void by_rows(ThreadPool& pool, size_t rows, size_t values_per_row, Fn fn) {
  const size_t values = rows * values_per_row;
  const size_t tasks = values < kMinParallelValues || pool.size() <= 1
                           ? 1
                           : std::min({pool.size() * kTasksPerThread, rows, values / kMinChunkValues});
  if (tasks <= 1) {
    fn(size_t{0}, rows);
    return;
  }
  pool.run(tasks, [&](size_t i) { fn(rows * i / tasks, rows * (i + 1) / tasks); });
}

// n bytes (at least Piece) from src to dst in Piece-byte moves, the last one overlapping
// the one before: a pixel's few channels, where a memcpy call costs more than the copy.
template <size_t Piece, class T>
inline void copy_in_pieces(T* dst, const T* src, size_t n) {
  static_assert(sizeof(T) == 1, "bytes");
  size_t i = 0;
  for (; i + Piece < n; i += Piece) std::memcpy(dst + i, src + i, Piece);
  std::memcpy(dst + n - Piece, src + n - Piece, Piece);
}

}  // namespace

Conv2dStep::Conv2dStep(std::unique_ptr<qs8::ConvWeights> w, const qs8::ConvGeometry& g, const int8_t* in, int8_t* out)
    : w_(std::move(w)), g_(g), in_(in), out_(out) {
  if (g_.k_h == 1 && g_.k_w == 1 && g_.pad_top == 0 && g_.pad_left == 0 && NarrowPointwise::applies(w_->gemm())) {
    narrow_ = std::make_unique<NarrowPointwise>(w_->gemm());
    return;
  }
  if (g_.batch != 1 || g_.out_h >= kMaxTileRows || g_.out_c < 2 * kTileChannelBlock) return;
  // Up to kMaxTiles tiles, each a multiple of the kernels' channel block.
  const size_t blocks = (g_.out_c + kTileChannelBlock - 1) / kTileChannelBlock;
  const size_t tiles = std::min(kMaxTiles, blocks);
  tile_channels_ = (blocks + tiles - 1) / tiles * kTileChannelBlock;
  const qs8::GemmWeights& gw = w_->gemm();
  const qs8::Requantization& rq = gw.requantization();
  for (size_t c0 = 0; c0 < g_.out_c; c0 += tile_channels_) {
    const size_t c1 = std::min(g_.out_c, c0 + tile_channels_);
    qs8::Requantization tile_rq(std::vector<int32_t>(rq.multiplier.begin() + c0, rq.multiplier.begin() + c1),
                                std::vector<int32_t>(rq.shift.begin() + c0, rq.shift.begin() + c1),
                                rq.output_zero_point, rq.act_min, rq.act_max);
    tiles_.push_back(std::make_unique<qs8::ConvWeights>(gw.weights() + c0 * gw.k(), c1 - c0, w_->k_h(), w_->k_w(),
                                                        w_->in_c(), gw.bias() + c0, w_->input_zero_point(),
                                                        std::move(tile_rq)));
  }
  if (g_.out_h * g_.out_w > 1) scratch_.resize(g_.out_h * g_.out_w * g_.out_c);
}

void Conv2dStep::run_tile(size_t t) const {
  const qs8::ConvWeights& w = *tiles_[t];
  qs8::ConvGeometry g = g_;
  g.out_c = w.out_c();
  const size_t c0 = t * tile_channels_, pixels = g_.out_h * g_.out_w;
  if (pixels == 1) {
    qs8::qs8_conv2d(w, g, in_, out_ + c0);
    return;
  }
  int8_t* block = scratch_.data() + c0 * pixels;  // [pixels][g.out_c]
  qs8::qs8_conv2d(w, g, in_, block);
  for (size_t p = 0; p < pixels; ++p) std::memcpy(out_ + p * g_.out_c + c0, block + p * g.out_c, g.out_c);
}

// Output rows [r0, r1) over the batch's images: with stride 1 one run of pixels, else row
// by row (a 1x1 filter without padding reads pixel (y * stride_h, x * stride_w)).
void Conv2dStep::run_narrow_rows(size_t r0, size_t r1) const {
  const size_t c = g_.in_c, n = g_.out_c;
  if (g_.stride_h == 1 && g_.stride_w == 1) {
    narrow_pointwise(*narrow_, in_ + r0 * g_.in_w * c, c, (r1 - r0) * g_.out_w, out_ + r0 * g_.out_w * n);
    return;
  }
  for (size_t r = r0; r < r1; ++r) {
    const size_t b = r / g_.out_h, y = r % g_.out_h * g_.stride_h;
    const int8_t* row = in_ + (b * g_.in_h + y) * g_.in_w * c;
    narrow_pointwise(*narrow_, row, g_.stride_w * c, g_.out_w, out_ + r * g_.out_w * n);
  }
}

void Conv2dStep::run(ThreadPool& pool) const {
  const size_t macs = g_.out_h * g_.out_w * g_.out_c * g_.k_h * g_.k_w * g_.in_c;
  if (narrow_) {
    // A narrow layer takes about the time of the wide kernels' on a block of 16 channels
    // (each channel pays its own reduction and requantization): split as such a layer.
    const size_t work = macs / g_.out_c * kTileChannelBlock, rows = g_.batch * g_.out_h;
    const size_t tasks = std::min({pool.size() * kTasksPerThread, rows, work / kMinTaskMacs});
    if (pool.size() <= 1 || tasks <= 1 || work < kMinParallelMacs) {
      run_narrow_rows(0, rows);
    } else {
      pool.run(tasks, [&](size_t i) { run_narrow_rows(rows * i / tasks, rows * (i + 1) / tasks); });
    }
    return;
  }
  if (!tiles_.empty() && pool.size() > 1 && macs >= kMinParallelMacs && g_.out_h < 2 * pool.size()) {
    pool.run(tiles_.size(), [this](size_t t) { run_tile(t); });
    return;
  }
  by_row_bands(pool, g_, g_.out_c, macs, in_, out_,
               [this](const qs8::ConvGeometry& g, const int8_t* in, int8_t* out) { qs8::qs8_conv2d(*w_, g, in, out); });
}

void DepthwiseConv2dStep::run(ThreadPool& pool) const {
  const size_t out_c = g_.in_c * g_.depth_multiplier;
  const size_t macs = g_.out_h * g_.out_w * out_c * g_.k_h * g_.k_w * kDepthwiseMacCost;
  by_row_bands(pool, g_, out_c, macs, in_, out_,
               [this](const qs8::DwGeometry& g, const int8_t* in, int8_t* out) { qs8::qs8_dwconv2d(*w_, g, in, out); });
}

PaddedDepthwiseConv2dStep::PaddedDepthwiseConv2dStep(std::unique_ptr<qs8::DwWeights> w, const qs8::DwGeometry& padded,
                                                     size_t channels, int8_t zero_point,
                                                     std::shared_ptr<std::vector<int8_t>> scratch, const int8_t* in,
                                                     int8_t* out)
    : w_(std::move(w)),
      g_(padded),
      channels_(channels),
      zero_point_(zero_point),
      scratch_(std::move(scratch)),
      in_(in),
      out_(out) {
  const size_t in_bytes = g_.batch * g_.in_h * g_.in_w * g_.in_c;
  const size_t out_bytes = g_.batch * g_.out_h * g_.out_w * g_.in_c;
  if (scratch_->size() < in_bytes + out_bytes) scratch_->resize(in_bytes + out_bytes);
}

void PaddedDepthwiseConv2dStep::run(ThreadPool& pool) const {
  const size_t cp = g_.in_c, c = channels_;
  const size_t in_pixels = g_.batch * g_.in_h * g_.in_w;
  int8_t* padded_in = scratch_->data();
  int8_t* padded_out = padded_in + in_pixels * cp;
  // With 8 <= c and cp a multiple of 16 (as the planner pads), fixed-size moves: per
  // pixel, zero points over all cp values, then the c real ones in 8-byte pieces.
  const bool pieces = c >= 8 && cp % 16 == 0;
  // The copy in splits by pixels like elementwise steps, the layer by row bands (each
  // copying its rows out). The copies' loops see only values captured by copy: through `this` or references, every
  // int8 store could change them, and each would be reloaded per pixel.
  const int8_t* in = in_;
  int8_t* out = out_;
  const int8_t zp = zero_point_;
  by_rows(pool, in_pixels, cp, [in, zp, padded_in, pieces, c, cp](size_t p0, size_t p1) {
    int8_t fill[16];
    std::memset(fill, zp, sizeof(fill));
    for (size_t p = p0; p < p1; ++p) {
      int8_t* dst = padded_in + p * cp;
      if (pieces) {
        for (size_t j = 0; j < cp; j += 16) std::memcpy(dst + j, fill, 16);
        copy_in_pieces<8>(dst, in + p * c, c);
      } else {
        std::memcpy(dst, in + p * c, c);
        std::memset(dst + c, zp, cp - c);
      }
    }
  });
  auto copy_out = [out, padded_out, pieces, c, cp](size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p) {
      if (pieces) {
        copy_in_pieces<8>(out + p * c, padded_out + p * cp, c);
      } else {
        std::memcpy(out + p * c, padded_out + p * cp, c);
      }
    }
  };
  // The task that makes a band of output rows copies them out while they are in its
  // cache: no pass (and no wait for all threads) of its own.
  const size_t macs = g_.out_h * g_.out_w * cp * g_.k_h * g_.k_w * kDepthwiseMacCost;
  by_row_bands(pool, g_, cp, macs, padded_in, padded_out,
               [this, &copy_out, padded_out, cp](const qs8::DwGeometry& g, const int8_t* in, int8_t* band) {
                 qs8::qs8_dwconv2d(*w_, g, in, band);
                 const size_t p0 = static_cast<size_t>(band - padded_out) / cp;
                 copy_out(p0, p0 + g.batch * g.out_h * g.out_w);
               });
}

FullyConnectedStep::FullyConnectedStep(std::unique_ptr<qs8::GemmWeights> w, size_t rows, const int8_t* in, int8_t* out)
    : w_(std::move(w)), rows_(rows), out_(out) {
  for (size_t r = 0; r < rows; ++r) rows_[r] = in + r * w_->k();
}

void FullyConnectedStep::run(ThreadPool& pool) const {
  const qs8::GemmRows a{rows_.data(), rows_.size(), 1, w_->k(), w_->k()};
  qs8::qs8_gemm(*w_, a, out_, w_->n());
}

namespace {

// row(x row, y row, out row) for each output row (the last axis) of a broadcast, the rows
// split over the pool's threads.
template <class Row>
void broadcast_rows(ThreadPool& pool, const Broadcast4& b, const int8_t* x, const int8_t* y, int8_t* out, Row row) {
  const auto& s = b.shape;
  const auto& sa = b.a_strides;
  const auto& sb = b.b_strides;
  by_rows(pool, s[0] * s[1] * s[2], s[3], [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const size_t i2 = r % s[2], i1 = r / s[2] % s[1], i0 = r / (s[2] * s[1]);
      row(x + i0 * sa[0] + i1 * sa[1] + i2 * sa[2], y + i0 * sb[0] + i1 * sb[1] + i2 * sb[2], out + r * s[3]);
    }
  });
}

// TFLite's SUB on one pair of values: both rescaled to the common scale, subtracted,
// requantized to the output.
int8_t sub_one(int8_t x, int8_t y, const qs8::AddParams& p) {
  const int32_t a = qs8::shift_left_wrapping(p.input1_offset + x, p.left_shift);
  const int32_t b = qs8::shift_left_wrapping(p.input2_offset + y, p.left_shift);
  const int32_t sa = qs8::multiply_by_quantized_multiplier(a, p.input1_multiplier, p.input1_shift);
  const int32_t sb = qs8::multiply_by_quantized_multiplier(b, p.input2_multiplier, p.input2_shift);
  const int32_t raw =
      qs8::multiply_by_quantized_multiplier(sa - sb, p.output_multiplier, p.output_shift) + p.output_offset;
  return static_cast<int8_t>(std::min(p.act_max, std::max(p.act_min, raw)));
}

}  // namespace

AddStep::AddStep(const qs8::AddParams& p, const Broadcast4& b, const int8_t* x, const int8_t* y, int8_t* out,
                 bool subtract)
    : p_(p), b_(b), x_(x), y_(y), out_(out), subtract_(subtract) {
  if (!subtract && b.same_shape) {
    vector_.emplace(p);
  } else if (subtract) {
    table_ = std::make_unique<PairTable>(PairTable::of([&p](int8_t a, int8_t c) { return sub_one(a, c, p); }));
  } else if (!b.same_shape) {
    table_ = std::make_unique<PairTable>(PairTable::of_rows(
        [&p](const int8_t* a, const int8_t* c, int8_t* o, size_t n) { qs8::qs8_add(a, c, o, n, p); }));
  }
}

void AddStep::run(ThreadPool& pool) const {
  if (vector_) {
    by_chunks(
        pool, b_.size(),
        [this](size_t i, size_t e) { qs8::qs8_add_prepared(x_ + i, y_ + i, out_ + i, e - i, *vector_); },
        kArithmeticValueCost);
    return;
  }
  const PairTable& table = *table_;
  if (b_.same_shape) {
    by_chunks(pool, b_.size(), [&](size_t i, size_t e) { pair_lookup(table, x_ + i, y_ + i, out_ + i, e - i); });
    return;
  }
  const size_t n = b_.shape[3], sx = b_.a_strides[3], sy = b_.b_strides[3];
  broadcast_rows(pool, b_, x_, y_, out_, [&](const int8_t* x, const int8_t* y, int8_t* o) {
    if (sx == 1 && sy == 1) {
      pair_lookup(table, x, y, o, n);
    } else {
      for (size_t i = 0; i < n; ++i) o[i] = table.at(x[i * sx], y[i * sy]);
    }
  });
}

void MulStep::run(ThreadPool& pool) const {
  if (b_.same_shape) {
    by_chunks(
        pool, b_.size(), [this](size_t i, size_t e) { qs8::qs8_mul(x_ + i, y_ + i, out_ + i, e - i, p_); },
        kArithmeticValueCost);
    return;
  }
  const size_t n = b_.shape[3], sx = b_.a_strides[3], sy = b_.b_strides[3];
  broadcast_rows(pool, b_, x_, y_, out_, [&](const int8_t* x, const int8_t* y, int8_t* out) {
    if (sx == 1 && sy == 1) {
      qs8::qs8_mul(x, y, out, n, p_);
    } else {
      for (size_t i = 0; i < n; ++i) out[i] = qs8::mul_one(x[i * sx], y[i * sy], p_);
    }
  });
}

void PoolStep::run(ThreadPool& pool) const {
  auto kernel = [this](const qs8::PoolGeometry& g, const int8_t* in, int8_t* out) {
    if (is_max_) {
      qs8::qs8_maxpool(g, in, out);
    } else {
      qs8::qs8_avgpool(g, in, out);
    }
  };
  const qs8::PoolGeometry& g = g_;
  if (g.batch != 1) {
    kernel(g, in_, out_);
    return;
  }
  // Output rows [r0, r1) as a pooling of their own over the input rows their windows
  // reach: the windows are clipped to the same input rows, so every value is the same.
  by_rows(pool, g.out_h, g.out_w * g.channels * g.filter_h * g.filter_w, [&](size_t r0, size_t r1) {
    const ptrdiff_t first = static_cast<ptrdiff_t>(r0 * g.stride_h) - g.pad_top;
    const ptrdiff_t last = static_cast<ptrdiff_t>((r1 - 1) * g.stride_h + g.filter_h - 1) - g.pad_top;
    const ptrdiff_t lo = std::max<ptrdiff_t>(first, 0);
    const ptrdiff_t hi = std::min<ptrdiff_t>(last, static_cast<ptrdiff_t>(g.in_h) - 1);
    qs8::PoolGeometry s = g;
    s.in_h = static_cast<size_t>(hi - lo + 1);
    s.pad_top = lo - first;
    s.out_h = r1 - r0;
    kernel(s, in_ + static_cast<size_t>(lo) * g.in_w * g.channels, out_ + r0 * g.out_w * g.channels);
  });
}

LutStep::LutStep(std::string op, const int8_t table[256], size_t n, const int8_t* in, int8_t* out)
    : op_(std::move(op)), n_(n), in_(in), out_(out) {
  std::memcpy(table_, table, sizeof(table_));
}

void LutStep::run(ThreadPool& pool) const {
  by_chunks(pool, n_, [this](size_t i, size_t e) { qs8::qs8_lut(in_ + i, out_ + i, e - i, table_); });
}

void PreluStep::run(ThreadPool& pool) const {
  const size_t c = p_.alpha.size();
  by_chunks(pool, pixels_, [this, c](size_t p0, size_t p1) { prelu(p_, in_ + p0 * c, out_ + p0 * c, p1 - p0); });
}

void SoftmaxStep::run(ThreadPool& pool) const { qs8::qs8_softmax(in_, out_, rows_, depth_, p_); }

template <>
void QuantizeStep::run(ThreadPool& pool) const {
  by_chunks(pool, n_,
            [this](size_t i, size_t e) { qs8::qs8_quantize(in_ + i, out_ + i, e - i, q_.scale, q_.zero_point); });
}

template <>
void DequantizeStep::run(ThreadPool& pool) const {
  by_chunks(pool, n_, [this](size_t i, size_t e) {
    if (!q_.is_unsigned) {
      qs8::qs8_dequantize(in_ + i, out_ + i, e - i, q_.scale, q_.zero_point);
      return;
    }
    const auto* in = reinterpret_cast<const uint8_t*>(in_);
    for (; i < e; ++i) out_[i] = q_.scale * static_cast<float>(static_cast<int32_t>(in[i]) - q_.zero_point);
  });
}

void ConcatStep::run(ThreadPool& pool) const {
  size_t bytes = 0;  // of the output per outer index
  for (const Part& part : parts_) bytes += part.bytes;
  by_rows(pool, outer_, bytes, [&](size_t o0, size_t o1) {
    uint8_t* dst = out_ + o0 * bytes;
    for (size_t o = o0; o < o1; ++o) {
      for (const Part& part : parts_) {
        std::memcpy(dst, part.src + o * part.bytes, part.bytes);
        dst += part.bytes;
      }
    }
  });
}

void PadStep::run(ThreadPool& pool) const {
  const auto& is = in_shape_;
  const auto& os = out_shape_;
  const size_t row = is[3] * element_;
  if (before_[0] + before_[1] + before_[2] + before_[3] == 0 && is[0] == os[0] && is[1] == os[1] && is[2] == os[2] &&
      row >= 16 && row <= 256) {
    // Only channels added at the end (a residual block widening its shortcut): each pixel's
    // values, then the padding value.
    const size_t pixels = is[0] * is[1] * is[2], out_row = os[3] * element_, pad = out_row - row;
    uint8_t fill[16];
    std::memset(fill, value_, sizeof(fill));
    by_rows(pool, pixels, out_row, [&](size_t p0, size_t p1) {
      for (size_t p = p0; p < p1; ++p) {
        uint8_t* dst = out_ + p * out_row;
        copy_in_pieces<16>(dst, in_ + p * row, row);
        // Up to 16 padding values in one 16-byte store; what it writes past the pixel, the
        // next pixel's copy overwrites (the last pixel of a task's share, which another
        // thread's may follow, has its padding set exactly).
        if (pad <= 16 && p + 1 < p1) {
          std::memcpy(dst + row, fill, 16);
        } else {
          std::memset(dst + row, value_, pad);
        }
      }
    });
    return;
  }
  // Per output row (the first two axes): the padding value everywhere, then the input's
  // pixels of that row, if any.
  const size_t out_row = os[2] * os[3] * element_;
  by_rows(pool, os[0] * os[1], out_row, [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      uint8_t* dst = out_ + r * out_row;
      std::memset(dst, value_, out_row);
      const size_t o0 = r / os[1], o1 = r % os[1];
      if (o0 < before_[0] || o0 - before_[0] >= is[0] || o1 < before_[1] || o1 - before_[1] >= is[1]) continue;
      const uint8_t* src = in_ + ((o0 - before_[0]) * is[1] + (o1 - before_[1])) * is[2] * row;
      for (size_t i2 = 0; i2 < is[2]; ++i2) {
        std::memcpy(dst + ((i2 + before_[2]) * os[3] + before_[3]) * element_, src + i2 * row, row);
      }
    }
  });
}

void MeanStep::run(ThreadPool& pool) const {
  const auto n = static_cast<int32_t>(p_.count);
  for (size_t o = 0; o < p_.outer; ++o) {
    std::fill(sums_.begin(), sums_.end(), 0);
    const int8_t* src = in_ + o * p_.count * p_.inner;
    for (size_t r = 0; r < p_.count; ++r, src += p_.inner) {
      for (size_t i = 0; i < p_.inner; ++i) sums_[i] += src[i];
    }
    int8_t* dst = out_ + o * p_.inner;
    for (size_t i = 0; i < p_.inner; ++i) {
      const int32_t shifted = sums_[i] - p_.input_zero_point * n;
      int32_t acc = qs8::multiply_by_quantized_multiplier(shifted, p_.multiplier, p_.shift) + p_.output_zero_point;
      acc = std::min(127, std::max(-128, acc));
      dst[i] = static_cast<int8_t>(acc);
    }
  }
}

void GatherStep::run(ThreadPool&) const {
  uint8_t* dst = out_;
  if (run_ == 1) {
    for (size_t start : starts_) *dst++ = in_[start];
    return;
  }
  for (size_t start : starts_) {
    std::memcpy(dst, in_ + start, run_);
    dst += run_;
  }
}

void ResizeBilinearStep::run(ThreadPool& pool) const {
  const size_t out_h = ys_.lower.size(), out_w = xs_.lower.size(), rows = batch_ * out_h;
  auto run_rows = [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const size_t b = r / out_h, oy = r % out_h;
      const int8_t* image = in_ + b * in_h_ * in_w_ * c_;
      const BilinearRow row{image + static_cast<size_t>(ys_.lower[oy]) * in_w_ * c_,
                            image + static_cast<size_t>(ys_.upper[oy]) * in_w_ * c_,
                            ys_.weight[oy],
                            xs_.lower.data(),
                            xs_.upper.data(),
                            xs_.weight.data(),
                            out_w,
                            c_};
      bilinear_row(row, out_ + r * out_w * c_);
    }
  };
  by_rows(pool, rows, out_w * c_, run_rows);
}

void CopyStep::run(ThreadPool& pool) const { std::memmove(dst_, src_, bytes_); }

}  // namespace edgeinf::engine
