// int8 GEMM with VPDPBUSD (AVX-VNNI, AVX-512 VNNI), and its exact AVX2 emulation for tests.
//
// VPDPBUSD adds four products of unsigned by signed bytes to each int32 lane without
// intermediate saturation, so activations enter offset to uint8 (a + 128, flipping the
// sign bit) and the accumulators start from bias - (zero_point + 128) * sum(w)
// (GemmWeights::bias_minus_u8_zero_point_terms()): the sum is then the reference's,
// modulo 2^32 like the reference's int32 accumulator. Weights are kDotLayout panels.
//
// The driver (dot_driver__avx2.cc) gathers and offsets the rows, walks the tiles and
// requantizes with the AVX2 epilogue; each ISA file supplies only its micro-kernel tiles
// (dot_tile_inl.h), so that instructions of a wider ISA appear in no code shared with
// other paths (no inline function or template the linker could pick for them).
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgeinf::qs8 {

class GemmWeights;
struct GemmRows;
class ConvWeights;
struct ConvGeometry;

// Where a tile requantizes its accumulators itself, exactly as the AVX2 epilogue does:
// with rq_params.h's float form (scale, offset, offset_neg) or else TFLite's fixed-point
// arithmetic (multiplier, left and right shifts, zero point), the parameters from the
// tile's first column; the output clamp; and the tile's first output row (rows
// out_stride apart) with ncols valid columns.
struct DotOutput {
  const float *scale, *offset, *offset_neg;  // or the guarded form's (GemmWeights), for tiles of that form
  bool split;
  const int32_t *multiplier, *left_shift, *right_shift;
  int32_t zero_point;
  int32_t act_min, act_max;
  int8_t* out;
  size_t out_stride, ncols;
};

// The fused tiles' epilogue of columns [col0, col0 + ncols) (out left to the caller): the
// float form where `float_form`, else the guarded float form where the weights have one
// (tiles of that form: it rounds explicitly, whatever MXCSR says), else the fixed-point
// steps. For the GEMM's and the indirect convolution's drivers (dot_driver__avx2.cc).
DotOutput fused_output(const GemmWeights& w, bool float_form, size_t col0, size_t ncols, size_t out_stride);

// acc[j * acc_stride + 16 * r + i] = start[16 * j + i] + sum over kquads quads of K of row r
// of a (uint8, rows a_stride apart) times column i of panel j ([kquads][16 columns][4]
// int8, panels panel_bytes apart): a tile of rows by panels of 16 columns. With `fused`
// (only where DotTiles::requantizes), the tile stores the requantized outputs there instead.
using DotTile = void (*)(const uint8_t* a, size_t a_stride, size_t kquads, const int8_t* panel, size_t panel_bytes,
                         const int32_t* start, int32_t* acc, size_t acc_stride, const DotOutput* fused);

inline constexpr size_t kDotMaxRows = 12;
inline constexpr size_t kDotMaxPanels = 4;

// tile[r] multiplies r rows, for 1 <= r <= mr.
struct DotTileRow {
  DotTile tile[kDotMaxRows + 1];
};

// panels[c].tile[r]: r rows by c panels, for 1 <= r <= mr, 1 <= c <= nc. `requantizes`: the
// tiles take a DotOutput.
struct DotTiles {
  size_t mr, nc;
  DotTileRow panels[kDotMaxPanels + 1];
  bool requantizes;
};

// One filter tap of an indirect convolution: its input values' offset from a window's
// origin, its weights' byte offset in a panel.
struct DotTap {
  ptrdiff_t input;
  size_t weights;
};

// An indirect convolution's tile (dot_indirect_tile_inl.h): as DotTile, but row r's K is
// the segments of kquads quads at origins[r] + taps[t].input, t < tap_count, multiplied
// with the panel's quads from taps[t].weights on (tap-major: kDotLayout when the input
// channels are a multiple of 4), and a fused tile stores row r at out_rows[r] (the rows
// need not be evenly spaced; fused->out and out_stride are not read).
using DotIndirectTile = void (*)(const uint8_t* const* origins, const DotTap* taps, size_t tap_count, size_t kquads,
                                 const int8_t* panel, size_t panel_bytes, const int32_t* start, int32_t* acc,
                                 size_t acc_stride, const DotOutput* fused, int8_t* const* out_rows);

struct DotIndirectTileRow {
  DotIndirectTile tile[kDotMaxRows + 1];
};

struct DotIndirectTiles {
  size_t mr, nc;
  DotIndirectTileRow panels[kDotMaxPanels + 1];
  bool requantizes;
};

// Row m0 + r of A, offset to uint8 (a + 128), into dst[r * stride, r * stride + kp), zeros
// after K (the weights there are zero): the rows every VPDPBUSD and TDPBUSD kernel multiplies.
void gather_rows_u8(const GemmRows& a, size_t m0, size_t rows, uint8_t* dst, size_t kp, size_t stride);

void qs8_gemm_dot(const DotTiles& tiles, const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
// A convolution of few input channels (ConvWeights::direct()): each output pixel's window
// copied whole (conv_window_rows), so that K is read in quads across the filter taps.
void qs8_conv2d_dot(const DotTiles& tiles, const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);

// The input of a convolution with its padding: pad_top rows above, pad_left columns left,
// and enough below and right for every window; images padded_h x padded_w pixels.
struct PaddedInput {
  size_t padded_h, padded_w, pad_top, pad_left;
  explicit PaddedInput(const ConvGeometry& g);  // expects pad_top, pad_left >= 0
  size_t values(size_t batch, size_t channels) const { return batch * padded_h * padded_w * channels; }
};
// The padded copy of `in`, offset to uint8 (a + 128), into dst (p.values() bytes), the
// padding filled with `padding` (the input zero point + 128: a tap there adds nothing).
void copy_padded(const ConvGeometry& g, const PaddedInput& p, const int8_t* in, uint8_t padding, uint8_t* dst);

// A convolution of several filter taps and input channels a multiple of 4 on indirect
// tiles: the input copied once to uint8 with its padding around it (zero points), each
// tile's rows read in place at their windows, tiles made of pixels that share which taps
// fall in the padding, and those taps left out. `narrow` serves 16 output channels or
// fewer (one panel: taller tiles keep enough chains), `wide` the rest. Other convolutions
// go to qs8_conv2d__gemm.
void qs8_conv2d_indirect_dot(const DotIndirectTiles& wide, const DotIndirectTiles& narrow, const ConvWeights& w,
                             const ConvGeometry& g, const int8_t* in, int8_t* out);

// The AVX2 GEMM's epilogue (avx2.cc): requantizes rows of 16 int32 accumulators ([rows][16],
// columns col0 onwards) and stores ncols values per row.
void qs8_gemm_requantize_rows__avx2(const GemmWeights& w, size_t col0, size_t ncols, const int32_t* acc, size_t rows,
                                    int8_t* out, size_t out_stride);

void qs8_gemm__avx2vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
void qs8_gemm__avx512vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
void qs8_gemm__avx2_emulated_vnni(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
// The same GEMM on AMX tiles (avx512amx.cc): TDPBUSD on the same uint8 rows and kDotLayout-
// ordered panels, the AVX-512 epilogue on the stored accumulators.
void qs8_gemm__avx512amx(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride);
// A convolution on AMX tiles read in place from the padded input (qs8_conv2d_indirect_dot's
// cases: several taps, input channels a multiple of 4; others go to the GEMM).
void qs8_conv2d_indirect__avx512amx(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_direct__avx2vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_direct__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_direct__avx2_emulated_vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_indirect__avx2vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_indirect__avx512vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out);
void qs8_conv2d_indirect__avx2_emulated_vnni(const ConvWeights& w, const ConvGeometry& g, const int8_t* in,
                                             int8_t* out);

}  // namespace edgeinf::qs8
