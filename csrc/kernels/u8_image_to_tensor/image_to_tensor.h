// Camera frame (8-bit packed or YUV) to a model's input tensor in one fused pass.
//
// A pass over one output row:
//   1. horizontal resampling of each needed source row, per "pass" (a set of output
//      channels read from one plane), into 16-bit rows in units of 1/128 of a pixel
//      level (bilinear/nearest: two taps, 7-bit weights; area: box weights);
//   2. vertical blending of two such rows (15-bit weight) or, for area, the box sum;
//   3. colour conversion (YUV -> RGB, RGB -> gray) and per-channel normalization, then
//      float32 or int8/uint8 quantization, written straight into the output tensor.
// Every step is integer arithmetic except step 3, which is a fixed sequence of float32
// multiplies and adds (no FMA), so every ISA produces the same bits as the scalar
// reference, floats included.
//
// This header is shared by the portable driver (plan.cc, run.cc) and the ISA files
// (scalar.cc, avx2.cc, neon.cc); the ISA files provide the row primitives in Kernels.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace edgeinf::preprocess {

enum class Format { kRGB, kBGR, kRGBA, kBGRA, kGray, kNV12, kNV21, kI420, kYUYV };
enum class Resize { kNearest, kBilinear, kArea };
enum class OutType { kFloat32, kInt8, kUInt8 };
enum class YuvRange { kLimited, kFull };

// Fixed-point units of the intermediate rows. A horizontal tap pair p0*w0 + p1*w1 with
// w0 + w1 = 128 lands in [0, 255*128] = [0, 32640]: 1/128 of a level, fits int16.
constexpr int kHBits = 7;
constexpr int kHOne = 1 << kHBits;                            // 128
constexpr int kVBits = 15;                                    // vertical weight: v = h0 + ((h1-h0)*b1 + 2^14) >> 15
constexpr int kAreaBits = 11;                                 // area weights per axis sum to 2^11
constexpr int kAreaShift = 2 * kAreaBits + 8 - (8 + kHBits);  // 15: area sum -> 1/128 units
constexpr int kRowSlack = 32;  // int16 elements of slack after each row buffer (SIMD overrun)
constexpr int kWindow = 8;     // bytes a SIMD path may read from a tap-0 pixel onwards

// One horizontal pass: `nch` output channels read from one source plane. Output channel
// c of output pixel x is w0 * row[offset[x] + i0[c]] + w1 * row[offset[x] + i1[c]].
struct HPass {
  int plane = 0;                      // 0: packed / luma, 1: chroma (NV12 UV, I420 U), 2: I420 V
  int nch = 1;                        // 1..3 output channels
  bool planar = false;                // channel c goes to row buffer c (else interleaved x*nch+c)
  bool chroma_rows = false;           // rows follow the 4:2:0 chroma table
  int bpp = 1;                        // bytes between horizontally adjacent samples of this plane
  std::array<uint8_t, 3> i0{}, i1{};  // byte positions of tap 0 / tap 1 inside the window
  // bilinear / nearest: per output pixel, byte offset of tap 0 in the row and w0|w1<<8
  std::vector<int32_t> offset;
  std::vector<uint16_t> wpair;
  // The same weights negated, as int8 bytes (-w0 | -w1 << 8): AVX2 multiplies the unsigned
  // pixels by them (VPMADDUBSW); -(w0 * p0 + w1 * p1) lies in [-32640, 0], no saturation.
  std::vector<uint16_t> wpair_neg;
  int simd_end8 = 0;  // leading pixels whose 8-byte window lies inside the plane row
  int simd_end4 = 0;  // same for a 4-byte window
  // Chunk gather (4-byte windows, nch 1 or 2 planar): per block of 16 output pixels, chunk
  // j (0..7) is the 16 row bytes from chunk_offset[8 * block + j], holding the windows of
  // pixels 2j and 2j + 1. chunk_control holds 32 * nch bytes per block: byte
  // 32 * g + chunk_byte(...) is the chunk byte that becomes that tap byte (see chunk_byte).
  // One 16-byte load per two pixels instead of two 4-byte loads and their unpacks.
  // simd_end16: the leading pixels (whole blocks) it covers.
  std::vector<int32_t> chunk_offset;
  std::vector<uint8_t> chunk_control;
  int simd_end16 = 0;
  // area: per output pixel, taps [tap_start[x], tap_start[x+1]) of (byte offset, weight)
  std::vector<int32_t> tap_start;
  std::vector<int32_t> tap_offset;  // byte offset of the tap's sample (add i0[c])
  std::vector<int32_t> tap_weight;  // sums to 2^kAreaBits per output pixel

  // Every tap inside a 4-byte window, for one channel or two planar ones (gray, Y, I420
  // U/V, YUYV Y, NV12 UV): the SIMD paths' 4-byte-window and chunk kernels.
  bool window4() const { return nch == 1 ? i1[0] < 4 : nch == 2 && planar && i1[0] < 4 && i1[1] < 4; }
};

// Where the chunk gather puts tap t of channel c of block pixel p (0..15), as a byte of a
// 256-bit register (lane p / 8). Chunks j and j + 4 (j in 0..3) are loaded as the two lanes
// of one register and byte-shuffled, each dword of the result coming from one chunk.
// One channel: one register, dword q of each lane from chunks q and q + 4; pixel p's pair
// at bytes 2p, 2p + 1 (pixels 8-15 in lane 1), so VPMADDUBSW with the weights in memory
// order gives the 16 pixels in order. Two channels: register g (0, 1) holds pixels
// 4g..4g+3 (lane 0) and 8+4g..8+4g+3 (lane 1), each lane 4 pairs of channel 0 then 4 of
// channel 1, the dwords alternating between chunks 2g and 2g + 1 (+4); after the
// multiplies the 64-bit unpacks of the two registers give each channel's pixels in order.
constexpr int chunk_byte(int nch, int p, int c, int t) {
  if (nch == 1) return 16 * (p / 8) + 2 * (p % 8) + t;
  return 16 * (p / 8) + 8 * c + 2 * (p % 4) + t;
}
constexpr int chunk_register(int nch, int p) { return nch == 1 ? 0 : p % 8 / 4; }

// Vertical table for one row kind (luma or chroma): two-tap rows, or area taps.
struct VTable {
  std::vector<int32_t> row0;  // first source row (absolute plane row)
  std::vector<int32_t> b1;    // weight of row0 + 1 in 1/2^15; 0 means row0 only
  bool disjoint = false;      // no source row serves two output rows (downscale): fuse, no cache
  std::vector<int32_t> tap_start, tap_row, tap_weight;  // area
};

// Colour stage: per output channel, clamp(((k0 + k1*a0) + k2*a1) + k3*a2, lo, hi) in
// pixel levels (matrix mode), or a0 alone (affine mode), then * scale + bias, then for
// integer outputs round half to even and clamp to [qmin, qmax].
struct Channel {
  float k0 = 0, k1 = 0, k2 = 0, k3 = 0;
  float scale = 1, bias = 0;  // affine mode: scale already includes the 1/128 of the units
};

// One call of the colour stage: element i of a row has channel ch[i % period].
struct Stage {
  std::array<Channel, 3> ch{};
  int period = 1;
  OutType type = OutType::kFloat32;
  float qmin = 0, qmax = 0;
  bool expand = false;  // matrix inputs hold one value per pixel; output i reads input i / 3
  // [qmin, qmax] is the whole int8/uint8 range and every value fits int32: rounding to int32
  // then saturating to 8 bits equals the reference's clamp-then-round (SIMD may skip the clamp)
  bool saturating = false;
  // ch's constants repeated over 24 elements (a multiple of both periods) for SIMD paths:
  // rows k0, k1, k2, k3, scale, bias
  float pattern[6][24] = {};
  // Affine stage with an integer output: an integer form proven at plan time to give the
  // reference's value for every input v in [0, 32767] (see fixed_map in plan.cc):
  //   out = clamp((v * iwhole + ((v * imul) >> 16) + iadd) >> shift, lo, hi)
  // whose true intermediate values lie in int16, so wrapping 16-bit SIMD arithmetic is
  // exact and no float conversion is needed. Repeated over 48 elements (a multiple of 3
  // and of the 8/16-lane vectors) like `pattern`. iwhole is 0 or 1, so v * iwhole is
  // v & -iwhole: SIMD paths save a multiply (on Zen 1 all integer multiplies share one pipe).
  bool int_map = false;
  int shift = 0;
  int16_t lo = 0, hi = 0;
  int16_t iwhole[48] = {};
  uint16_t imul[48] = {};
  int16_t iadd[48] = {};
};

// YUV -> RGB in fixed point (the reference is s16_yuv_rgb__scalar). Inputs Y, U, V are
// resampled rows in 1/128 levels; each is rounded to 1/32 levels (x + 2) >> 2, offset
// (Y - 32 * y0, U - 4096, V - 4096) and shifted left by its plane's s (so that every
// coefficient of that plane is below 1 in Q15). A channel is
//   c = T(Y', ky) + T(U', ku[c]) + T(V', kv[c]),  T(x, k) = ((x << s) * k + 2^14) >> 15
// (x86 PMULHRSW, Arm SQRDMULH), clamped to [0, 255 * 32] and returned in 1/128 levels
// (c * 4), the input of the affine stage. Every intermediate fits int16.
struct Yuv {
  int nch = 3;                        // output channels, interleaved (1: one channel plane)
  int16_t y_off = 0;                  // 32 * 16 (limited range) or 0 (full range)
  int sy = 0, su = 0, sv = 0;         // left shifts of Y', U', V' (0, 1 or 2)
  int16_t ky = 0;                     // luma coefficient, Q15 after the shift
  std::array<int16_t, 3> ku{}, kv{};  // per output channel
};

struct Plan {
  Format format = Format::kBGR;
  Resize resize = Resize::kBilinear;
  OutType out_type = OutType::kFloat32;
  bool nchw = false;
  bool matrix = false;             // colour stage needs a0, a1, a2 (RGB -> gray)
  bool yuv = false;                // YUV source: fixed-point YUV -> RGB (inputs a0, a1, a2), then the affine stage
  Yuv yuv_row;                     // NHWC: all channels of a row, interleaved
  std::array<Yuv, 3> yuv_plane{};  // NCHW: one per channel plane
  bool expand = false;             // matrix inputs hold one value per pixel, the output three (NHWC YUV)
  int src_w = 0, src_h = 0;
  int roi_x = 0, roi_y = 0, roi_w = 0, roi_h = 0;
  int out_w = 0, out_h = 0, out_c = 3;
  int dst_x = 0, dst_y = 0, dst_w = 0, dst_h = 0;  // content rectangle inside the output
  float qmin = 0, qmax = 0;
  std::array<Channel, 3> channel{};
  std::array<Stage, 3> stage{};      // NHWC: stage[0] for the whole row; NCHW: stage[c] per plane
  std::array<float, 3> pad_value{};  // output-domain value of the pad, per channel
  std::array<int, 3> plane_w{}, plane_h{}, plane_bpp{};
  int planes = 1;
  // Per plane, the first byte of a row that any pass reads: column offsets (HPass::offset,
  // tap_offset) count from there, so they fit int32 however wide the frame. span_bytes:
  // the bytes from there that the taps cover (area: the accumulated span).
  std::array<int64_t, 3> col_base{};
  std::array<int, 3> span_bytes{};
  std::vector<HPass> passes;
  // matrix mode: where a0, a1, a2 come from, as (pass, channel plane of that pass)
  std::array<std::array<int, 2>, 3> inputs{};
  VTable luma, chroma;
  int threads = 1;
};

// A source frame resolved to plane pointers.
struct Frame {
  const uint8_t* plane[3] = {nullptr, nullptr, nullptr};
  int64_t stride[3] = {0, 0, 0};
};

// The source rows of a later output row, for a row kernel to request from inside its loop
// a few cache lines per step, so that they arrive while the current row is computed; what
// the kernel leaves is requested after the row (flush).
struct LinePrefetch {
  const uint8_t* row0 = nullptr;  // null: nothing to request
  const uint8_t* row1 = nullptr;  // the second row of the pair, or row0 again
  int next = 0, end = 0;          // byte range [next, end) of each row still to request

  void flush() {
    if (!row0) return;
#pragma GCC unroll 4
    for (; next < end; next += 64) {  // unrolled: a 720p BGR row pair is 120 lines
      __builtin_prefetch(row0 + next);
      __builtin_prefetch(row1 + next);
    }
  }
};

// Row primitives one ISA provides. All take counts in elements.
struct Kernels {
  // Bilinear / nearest horizontal pass over one source row. `out` has nch rows of
  // `plane_stride` elements when planar, else one interleaved row.
  // `ahead`: see LinePrefetch (a kernel may leave it untouched).
  void (*hresample)(const HPass& pass, const uint8_t* row, int n, int16_t* out, int plane_stride, LinePrefetch& ahead);
  // hresample of row0 and row1 blended by vblend, fused (rows no other output row needs).
  void (*hblend)(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int n, int16_t* out,
                 int plane_stride, LinePrefetch& ahead);
  // out = h0 + ((h1 - h0) * b1 + 2^14) >> 15, for 0 <= b1 < 2^15.
  void (*vblend)(const int16_t* h0, const int16_t* h1, int32_t b1, int n, int16_t* out);
  // acc[i] (=|+=) w * row[i] for n bytes (area, vertical accumulation).
  void (*accumulate)(const uint8_t* row, int n, int32_t w, int32_t* acc, bool init);
  // Area horizontal reduction of an accumulated row into 1/128 units.
  void (*area_reduce)(const HPass& pass, const int32_t* acc, int n, int16_t* out, int plane_stride);
  // Affine colour stage: out[i] = v[i] * scale + bias of element i's channel.
  void (*affine)(const int16_t* v, int n, const Stage& st, void* out);
  // Matrix colour stage over three input rows (see Channel).
  void (*matrix)(const int16_t* a0, const int16_t* a1, const int16_t* a2, int n, const Stage& st, void* out);
  // Fixed-point YUV -> RGB of n pixels into k.nch interleaved channels (see Yuv).
  void (*yuv_rgb)(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, int16_t* out);
  // yuv_rgb, then affine by the stage's integer map (st.int_map, an integer output), fused:
  // the converted colour never goes through memory. Same values as the two calls.
  void (*yuv_quantize)(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, const Stage& st,
                       void* out);
  // Area, vertical: acc[i] (=|+=) the sum over k < count of w[k] * rows[k][i], for n bytes
  // and count <= kAreaRowBatch rows: one pass over acc for several source rows. A table
  // may leave it null: the driver then calls `accumulate` once per row (the same sums).
  void (*accumulate_rows)(const uint8_t* const* rows, const int32_t* w, int count, int n, int32_t* acc, bool init);
};

// The most rows one accumulate_rows call takes.
constexpr int kAreaRowBatch = 16;
// int32 elements an area accumulator row holds after its span: area_reduce__avx2 reads
// eight from each tap's first byte on.
constexpr int kAccSlack = 8;

const Kernels& kernels__scalar();
const Kernels& kernels__avx2();
const Kernels& kernels__neon();
// The primitives of the active path (kernels/dispatch.cc).
const Kernels& active_kernels();

// The scalar primitives, also used by SIMD files for tails and unvectorized cases.
void u8_hresample__scalar(const HPass& pass, const uint8_t* row, int begin, int end, int16_t* out, int plane_stride);
void u8_hblend__scalar(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int begin, int end,
                       int16_t* out, int plane_stride);
void s16_vblend__scalar(const int16_t* h0, const int16_t* h1, int32_t b1, int begin, int end, int16_t* out);
void u8_accumulate__scalar(const uint8_t* row, int begin, int end, int32_t w, int32_t* acc, bool init);
void s32_area_reduce__scalar(const HPass& pass, const int32_t* acc, int n, int16_t* out, int plane_stride);
void u8_accumulate_rows__scalar(const uint8_t* const* rows, const int32_t* w, int count, int begin, int end,
                                int32_t* acc, bool init);
// The AVX2 area primitives (area__avx2.cc).
void u8_accumulate_rows__avx2(const uint8_t* const* rows, const int32_t* w, int count, int n, int32_t* acc, bool init);
void s32_area_reduce__avx2(const HPass& pass, const int32_t* acc, int n, int16_t* out, int plane_stride);
void s16_affine__scalar(const int16_t* v, int begin, int end, const Stage& st, void* out);
void s16_yuv_rgb__scalar(const int16_t* y, const int16_t* u, const int16_t* v, int begin, int end, const Yuv& k,
                         int16_t* out);
void s16_yuv_quantize__scalar(const int16_t* y, const int16_t* u, const int16_t* v, int begin, int end, const Yuv& k,
                              const Stage& st, void* out);
void s16_matrix__scalar(const int16_t* a0, const int16_t* a1, const int16_t* a2, int begin, int end, const Stage& st,
                        void* out);

// The columns of a horizontal pass an ISA vectorizes: writes output columns [0, x) of row0
// (of row0 and row1 blended by b1 when it serves hblend) and returns x.
using HColumns = int (*)(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int n, int16_t* out,
                         int plane_stride, LinePrefetch& ahead);

// Kernels::hresample and Kernels::hblend of an ISA: its vectorized columns, then the scalar
// reference for the rest of the row.
template <HColumns columns>
void hresample_then_scalar(const HPass& pass, const uint8_t* row, int n, int16_t* out, int plane_stride,
                           LinePrefetch& ahead) {
  const int x = columns(pass, row, row, 0, n, out, plane_stride, ahead);
  u8_hresample__scalar(pass, row, x, n, out, plane_stride);
}

template <HColumns columns>
void hblend_then_scalar(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int n, int16_t* out,
                        int plane_stride, LinePrefetch& ahead) {
  const int x = columns(pass, row0, row1, b1, n, out, plane_stride, ahead);
  u8_hblend__scalar(pass, row0, row1, b1, x, n, out, plane_stride);
}

// Building and running (portable).
struct PlanRequest {
  Format format;
  int src_w, src_h;
  int roi_x, roi_y, roi_w, roi_h;
  int out_w, out_h, out_c;
  bool nchw;
  OutType out_type;
  Resize resize;
  bool letterbox;
  bool bgr_out;  // output channel order B, G, R instead of R, G, B
  YuvRange yuv_range;
  std::array<float, 3> scale, bias;  // per output channel, pixel level -> output domain
  std::array<float, 3> pad;          // pad colour in pixel levels, output channel order
  float qmin, qmax;
  // Row chunks the output is split into, 1..kMaxThreads; they run on the process's thread
  // pool, so at most on as many threads as the hardware has.
  int threads;
};

constexpr int kMaxThreads = 256;

Plan build_plan(const PlanRequest& request);  // throws std::invalid_argument
void run_plan(const Plan& plan, const Frame& frame, void* out);

}  // namespace edgeinf::preprocess
