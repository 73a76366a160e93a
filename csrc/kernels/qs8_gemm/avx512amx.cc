// The int8 GEMM on AMX (Intel Sapphire Rapids and later). TDPBUSD multiplies a tile of 16
// uint8 rows by up to 64 bytes of K with a tile of up to 16 quads of K by 16 int32 columns
// and adds the products to a tile of 16 x 16 int32, wrapping like VPDPBUSD: 16384
// multiply-adds per instruction, several times the AVX-512 VNNI path's rate.
//
// The operands are the VPDPBUSD GEMM's (dot_gemm.h): rows gathered as a + 128, accumulators
// starting from bias - (zero_point + 128) * sum(w), and kDotLayout-ordered panels, whose
// [quads of K][16 columns][4] order is exactly a B tile's, one quad of K per 64-byte row. K
// runs in chunks of equal depth (at most 16 quads, a tile's 64 bytes), so that it is padded
// by less than a quad per chunk. A block of 32 rows by 32 columns keeps four C tiles, two A
// and two B tiles in the eight tile registers; the C tiles go to memory and through the
// AVX-512 epilogue of the VNNI tiles (zmm_dot_inl.h).
//
// Compiled with AMX-TILE and AMX-INT8 for this file only and selected at run time only
// when CPUID reports them and the OS grants this process the tile state (dispatch.cc).
#include <immintrin.h>

// GCC 12 warns of the undefined pass-through operand inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <algorithm>
#include <cstring>

#include "../qs8_conv2d/conv2d.h"
#include "dot_gemm.h"
#include "gemm.h"
#include "zmm_dot_inl.h"

namespace edgeinf::qs8 {
namespace amx {  // named, so that tests find this file's functions by name
namespace {

constexpr size_t kTileRows = 16;  // rows of an A or C tile; columns of a B or C tile
constexpr size_t kBlockRows = 2 * kTileRows;
constexpr size_t kMaxChunkQuads = 16;  // a tile row holds 64 bytes: 16 quads of K
// Fewer rows than this run on the VNNI tiles: an A tile costs the same for one row as for
// 16, and where each B tile meets one A tile, loading it costs more than the VNNI tiles'
// whole work (the crossover measured on a batched fully connected layer).
constexpr size_t kFewRows = 12;

// LDTILECFG's operand: palette 1, then bytes per row and rows of each tile register.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// The registers (GCC's tile intrinsics take them as literal numbers): C tiles 0-3, of row
// half h and panel j at 2h + j; A tiles 4 and 5, of the two row halves; B tiles 6 and 7, of
// the two panels.
constexpr int kC00 = 0, kC11 = 3, kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7;

void configure_tiles(size_t chunk_quads) {
  TileConfig cfg;
  for (int t = kC00; t <= kC11; ++t) cfg.rows[t] = kTileRows, cfg.colsb[t] = 64;
  for (int t = kA0; t <= kA1; ++t) cfg.rows[t] = kTileRows, cfg.colsb[t] = static_cast<uint16_t>(4 * chunk_quads);
  for (int t = kB0; t <= kB1; ++t) cfg.rows[t] = static_cast<uint8_t>(chunk_quads), cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
}

// Where a block's operands lie: the two A tiles' rows (a[h], rows a_stride apart) and
// panels (panel_bytes apart), K as `taps` segments each of `chunks` chunks of chunk_quads
// quads, segment t at a[h] + a_tap[t] in the rows and at t * b_tap bytes in a panel. The
// GEMM's rows are one segment; a convolution's, one per filter tap.
struct BlockOperands {
  const uint8_t* a[2];
  long a_stride;
  const ptrdiff_t* a_tap;
  size_t taps, b_tap, chunks, chunk_quads;
  const int8_t* panel;
  size_t panel_bytes;
};

// acc[(2h + j) * 256 + 16 r + i]: the products of row r of row half h and column i of panel
// j. Only the tiles of two row halves (TwoHalves) and two panels (TwoPanels) are multiplied
// and stored.
template <bool TwoHalves, bool TwoPanels>
void multiply_block(const BlockOperands& op, int32_t* acc) {
  _tile_zero(0);
  if constexpr (TwoPanels) _tile_zero(1);
  if constexpr (TwoHalves) _tile_zero(2);
  if constexpr (TwoHalves && TwoPanels) _tile_zero(3);
  const size_t a_step = 4 * op.chunk_quads, b_step = 64 * op.chunk_quads;
  const long stride = op.a_stride;
  const int8_t* panel = op.panel;
  for (size_t t = 0; t < op.taps; ++t) {
    const uint8_t* a0 = op.a[0] + op.a_tap[t];
    const uint8_t* a1 = op.a[1] + op.a_tap[t];
    const int8_t* b = panel + t * op.b_tap;
    for (size_t c = 0; c < op.chunks; ++c, a0 += a_step, a1 += a_step, b += b_step) {
      _tile_loadd(4, a0, stride);
      _tile_loadd(6, b, 64);
      _tile_dpbusd(0, 4, 6);
      if constexpr (TwoPanels) {
        _tile_loadd(7, b + op.panel_bytes, 64);
        _tile_dpbusd(1, 4, 7);
      }
      if constexpr (TwoHalves) {
        _tile_loadd(5, a1, stride);
        _tile_dpbusd(2, 5, 6);
      }
      if constexpr (TwoHalves && TwoPanels) _tile_dpbusd(3, 5, 7);
    }
  }
  constexpr size_t kTile = kTileRows * kTileRows;
  _tile_stored(0, acc, 64);
  if constexpr (TwoPanels) _tile_stored(1, acc + kTile, 64);
  if constexpr (TwoHalves) _tile_stored(2, acc + 2 * kTile, 64);
  if constexpr (TwoHalves && TwoPanels) _tile_stored(3, acc + 3 * kTile, 64);
}

void multiply(const BlockOperands& op, bool two_halves, bool two_panels, int32_t* acc) {
  if (two_halves && two_panels) return multiply_block<true, true>(op, acc);
  if (two_halves) return multiply_block<true, false>(op, acc);
  if (two_panels) return multiply_block<false, true>(op, acc);
  multiply_block<false, false>(op, acc);
}

// Rows [r0, r0 + rows) of one panel's stored tile, plus the accumulator start, requantized
// into out (row r0 first) by the AVX-512 epilogue of form F (columns of panel j of the
// column pair that `o` describes).
template <Form F>
void requantize_tile(const int32_t* tile, const int32_t* start, size_t rows, const DotOutput& o, int panel,
                     int8_t* out) {
  using D = ZmmDot<F>;
  const typename D::Requantizer rq(o, panel);
  const __m512i s = _mm512_loadu_si512(start);
  for (size_t r = 0; r < rows; ++r) {
    rq.store(_mm512_add_epi32(_mm512_loadu_si512(tile + 16 * r), s), out + r * o.out_stride);
  }
  if constexpr (D::kRechecks) {  // the rare tile whose outputs need the exact steps again
    if (__builtin_expect(rq.unsure(), 0)) {
      for (size_t r = 0; r < rows; ++r) {
        rq.store_exact(_mm512_add_epi32(_mm512_loadu_si512(tile + 16 * r), s), out + r * o.out_stride);
      }
    }
  }
}

// A block whose accumulators are stored and wait for the epilogue: `rows[h]` output rows of
// row half h from out[h] (out_stride apart, at column 0), by the columns of one or two
// panels from col0.
struct StoredBlock {
  const int32_t* acc;
  int8_t* out[2];
  size_t rows[2];
  size_t col0;
  bool two_panels;
};

// Runs each block's epilogue one block late: a block's multiplications are issued first,
// then the block before it is requantized on the vector units while the tile unit works.
template <Form F>
class Pipeline {
 public:
  Pipeline(const GemmWeights& w, size_t out_stride)
      : w_(w), out_stride_(out_stride), fused_(F == Form::kFloat || !w.requantizes_in_double()) {}

  // The tiles to store the next block into.
  int32_t* next_acc() { return acc_[pending_ && pending_block_.acc == acc_[0] ? 1 : 0]; }

  // Takes the block just multiplied into next_acc(); finishes the one before.
  void stored(const StoredBlock& block) {
    if (pending_) finish(pending_block_);
    pending_block_ = block;
    pending_ = true;
  }

  void drain() {
    if (pending_) finish(pending_block_);
    pending_ = false;
  }

 private:
  void finish(const StoredBlock& b) {
    const size_t n = w_.n();
    DotOutput o = fused_ ? fused_output(w_, F == Form::kFloat, b.col0, std::min(2 * kTileRows, n - b.col0), out_stride_)
                         : DotOutput{};
    for (size_t h = 0; h < 2 && b.rows[h] > 0; ++h) {
      for (int p = 0; p < (b.two_panels ? 2 : 1); ++p) {
        const int32_t* tile = b.acc + (2 * h + static_cast<size_t>(p)) * kTileRows * kTileRows;
        const size_t c0 = b.col0 + kTileRows * static_cast<size_t>(p), count = b.rows[h];
        int8_t* dst = b.out[h] + c0;
        const int32_t* start = w_.bias_minus_u8_zero_point_terms() + c0;
        if (fused_) {
          requantize_tile<F>(tile, start, count, o, p, dst);
          continue;
        }
        const __m512i s = _mm512_loadu_si512(start);  // the double requantization of FULLY_CONNECTED
        for (size_t r = 0; r < count; ++r) {
          _mm512_storeu_si512(rows_ + 16 * r, _mm512_add_epi32(_mm512_loadu_si512(tile + 16 * r), s));
        }
        qs8_gemm_requantize_rows__avx2(w_, c0, std::min(kTileRows, n - c0), rows_, count, dst, out_stride_);
      }
    }
  }

  const GemmWeights& w_;
  size_t out_stride_;
  bool fused_;
  bool pending_ = false;
  StoredBlock pending_block_{};
  alignas(64) int32_t acc_[2][4 * kTileRows * kTileRows];
  alignas(64) int32_t rows_[kTileRows * kTileRows];
};

// Scratch bytes starting on a cache line: a tile row of 64 bytes then reads one line, not
// two (malloc aligns to 16).
uint8_t* aligned_scratch(size_t bytes) {
  uint8_t* p = scratch<uint8_t, 10>(bytes + 63);
  return p + (-reinterpret_cast<uintptr_t>(p) & 63);
}

// K in chunks of equal depth: the fewest chunks of at most 16 quads each, padding K by less
// than a quad per chunk.
size_t chunk_quads_of(size_t kquads) {
  const size_t chunks = (kquads + kMaxChunkQuads - 1) / kMaxChunkQuads;
  return (kquads + chunks - 1) / chunks;
}

template <Form F>
void gemm(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  const size_t n = w.n(), kquads = (a.k() + 3) / 4;
  const size_t chunk_quads = chunk_quads_of(kquads), chunks = (kquads + chunk_quads - 1) / chunk_quads;
  const size_t kp = 4 * chunk_quads * chunks;
  // kDotLayout's order with K padded to whole chunks (kDotLayout itself where no padding
  // is needed beyond the quad: the same panels serve both paths then).
  const PackLayout layout{kDotLayout.nr, kDotLayout.kq, 4 * chunk_quads, kBlockRows};
  const size_t panel_bytes = kp * kTileRows, panels = (n + kTileRows - 1) / kTileRows;
  // Blocks of rows whose uint8 copy stays within about 128 KB (L2), in whole tiles of 32
  // rows; the buffer holds whole tiles, so that the last tile's loads stay inside it (the
  // rows past the block's end are left over and their products never stored).
  const size_t mc = std::max(kBlockRows, (128 * 1024 / kp) / kBlockRows * kBlockRows);
  // Rows a cache line more apart than K where K is a multiple of 512: a tile's 16 rows at a
  // stride of 512 bytes or a multiple would fall in a quarter of the L1's sets or fewer.
  const size_t stride = kp % 512 == 0 ? kp + 64 : kp;
  uint8_t* abuf = aligned_scratch(std::min(mc, round_up(a.m, kBlockRows)) * stride);
  const int8_t* packed = w.packed(layout);
  const ptrdiff_t no_offset = 0;
  BlockOperands op{{abuf, abuf + kTileRows * stride},
                   static_cast<long>(stride),
                   &no_offset,
                   1,
                   0,
                   chunks,
                   chunk_quads,
                   packed,
                   panel_bytes};
  Pipeline<F> pipeline(w, out_stride);
  configure_tiles(chunk_quads);
  for (size_t m0 = 0; m0 < a.m; m0 += mc) {
    const size_t rows = std::min(mc, a.m - m0);
    gather_rows_u8(a, m0, rows, abuf, kp, stride);
    for (size_t j = 0; j < panels; j += 2) {
      const bool two_panels = j + 1 < panels;
      op.panel = packed + j * panel_bytes;
      for (size_t r0 = 0; r0 < rows; r0 += kBlockRows) {
        op.a[0] = abuf + r0 * stride, op.a[1] = op.a[0] + kTileRows * stride;
        const size_t first = std::min(kTileRows, rows - r0), second = std::min(kTileRows, rows - r0 - first);
        int32_t* acc = pipeline.next_acc();
        multiply(op, second > 0, two_panels, acc);
        int8_t* dst = out + (m0 + r0) * out_stride;
        pipeline.stored(
            StoredBlock{acc, {dst, dst + kTileRows * out_stride}, {first, second}, j * kTileRows, two_panels});
      }
    }
  }
  pipeline.drain();
  _tile_release();  // the tile state is not saved on context switches once released
}

// The convolution: runs of up to 16 output pixels of one output row, two runs a block, each
// run an A tile read in place from the padded uint8 input (pixels stride_w * in_c bytes
// apart), filter tap by filter tap; the channels of a tap in chunks that divide them.
template <Form F>
void conv(const ConvWeights& cw, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const GemmWeights& w = cw.gemm();
  const size_t n = w.n(), c = g.in_c, taps = g.k_h * g.k_w, quads = c / 4;
  size_t chunk_quads = std::min(quads, kMaxChunkQuads);
  while (quads % chunk_quads != 0) --chunk_quads;
  const PaddedInput p(g);
  const size_t pixel_step = g.stride_w * c;
  // A run's tile reads 16 pixels whatever its length: slack past the copy for the last run.
  const size_t values = p.values(g.batch, c);
  uint8_t* a = aligned_scratch(values + kTileRows * pixel_step + 64);
  copy_padded(g, p, in, static_cast<uint8_t>(w.input_zero_point() + 128), a);
  ptrdiff_t* a_tap = scratch<ptrdiff_t, 12>(taps);
  for (size_t ky = 0; ky < g.k_h; ++ky) {
    for (size_t kx = 0; kx < g.k_w; ++kx) {
      a_tap[ky * g.k_w + kx] = static_cast<ptrdiff_t>((ky * g.dilation_h * p.padded_w + kx * g.dilation_w) * c);
    }
  }
  const size_t k = w.k(), panel_bytes = k * kTileRows, panels = (n + kTileRows - 1) / kTileRows;
  const int8_t* packed = w.packed(kDotLayout);
  BlockOperands op{{a, a},     static_cast<long>(pixel_step), a_tap,       taps,
                   quads * 64, quads / chunk_quads,           chunk_quads, packed,
                   panel_bytes};
  const size_t image = p.padded_h * p.padded_w * c;
  const size_t runs_per_row = (g.out_w + kTileRows - 1) / kTileRows, runs = g.batch * g.out_h * runs_per_row;
  // Run r: its first pixel's window origin and output, and its length.
  auto run = [&](size_t r, const uint8_t** origin, int8_t** dst, size_t* length) {
    const size_t row = r / runs_per_row, x0 = (r % runs_per_row) * kTileRows, b = row / g.out_h, oy = row % g.out_h;
    *origin = a + b * image + (oy * g.stride_h * p.padded_w + x0 * g.stride_w) * c;
    *dst = out + (row * g.out_w + x0) * n;
    *length = std::min(kTileRows, g.out_w - x0);
  };
  Pipeline<F> pipeline(w, n);
  configure_tiles(chunk_quads);
  for (size_t j = 0; j < panels; j += 2) {
    const bool two_panels = j + 1 < panels;
    op.panel = packed + j * panel_bytes;
    for (size_t r = 0; r < runs; r += 2) {
      StoredBlock block{nullptr, {nullptr, nullptr}, {0, 0}, j * kTileRows, two_panels};
      run(r, &op.a[0], &block.out[0], &block.rows[0]);
      if (r + 1 < runs) run(r + 1, &op.a[1], &block.out[1], &block.rows[1]);
      int32_t* acc = pipeline.next_acc();
      multiply(op, block.rows[1] > 0, two_panels, acc);
      block.acc = acc;
      pipeline.stored(block);
    }
  }
  pipeline.drain();
  _tile_release();
}

}  // namespace
}  // namespace amx

void qs8_gemm__avx512amx(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  if (a.m == 0) return;
  if (a.m < amx::kFewRows) return qs8_gemm__avx512vnni(w, a, out, out_stride);
  switch (form_of(w)) {
    case Form::kFloat:
      return amx::gemm<Form::kFloat>(w, a, out, out_stride);
    case Form::kGuarded:
      return amx::gemm<Form::kGuarded>(w, a, out, out_stride);
    case Form::kFixed:
      break;
  }
  amx::gemm<Form::kFixed>(w, a, out, out_stride);
}

void qs8_conv2d_indirect__avx512amx(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  const size_t taps = g.k_h * g.k_w;
  if (taps == 1 || g.in_c % 4 != 0 || g.pad_top < 0 || g.pad_left < 0) return qs8_conv2d__gemm(w.gemm(), g, in, out);
  if (g.batch * g.out_h * g.out_w == 0) return;
  switch (form_of(w.gemm())) {
    case Form::kFloat:
      return amx::conv<Form::kFloat>(w, g, in, out);
    case Form::kGuarded:
      return amx::conv<Form::kGuarded>(w, g, in, out);
    case Form::kFixed:
      break;
  }
  amx::conv<Form::kFixed>(w, g, in, out);
}

}  // namespace edgeinf::qs8
