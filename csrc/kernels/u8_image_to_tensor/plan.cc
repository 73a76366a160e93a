// Building a preprocessing plan: geometry (ROI, letterbox), resampling tables, passes
// and the colour stage. Everything a frame does not change is computed here, once.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "image_to_tensor.h"

namespace edgeinf::preprocess {
namespace {

std::string str(int v) { return std::to_string(v); }

constexpr int kMaxRoiSide = 1 << 20;     // pixels
constexpr int kMaxOutputSide = 1 << 16;  // pixels

bool is_yuv420(Format f) { return f == Format::kNV12 || f == Format::kNV21 || f == Format::kI420; }
bool is_yuv(Format f) { return is_yuv420(f) || f == Format::kYUYV; }

// Two-tap source positions of `n` output samples spread over `len` source samples that
// start at `start` (absolute). Half-pixel centres: output i samples source
// (i + 0.5) * len / n - 0.5, clamped to the span (OpenCV INTER_LINEAR and TFLite
// ResizeBilinear(half_pixel_centers=True) agree on this). `bits` is the weight precision.
// Returns tap 0 (absolute) and the weight of tap 0 + 1, which is 0 when tap 0 alone counts.
// With `pair_inside`, tap 0 + 1 never leaves the span (SIMD loads both taps of a column
// at once): at the right end the pair (end-2, end-1) takes weight one. Rows are loaded
// separately and need not (their weight one would not fit the 15-bit weight anyway).
void linear_taps(int start, int len, int n, int bits, bool pair_inside, std::vector<int32_t>& t0,
                 std::vector<int32_t>& w1) {
  const int one = 1 << bits;
  const double scale = static_cast<double>(len) / n;
  t0.resize(n);
  w1.resize(n);
  for (int i = 0; i < n; ++i) {
    const double pos = (i + 0.5) * scale - 0.5;
    int s = static_cast<int>(std::floor(pos));
    int w = static_cast<int>(std::lround((pos - s) * one));  // ties away from zero; pos - s >= 0
    if (w == one) {
      ++s;
      w = 0;
    }
    if (s < 0) {
      s = 0;
      w = 0;
    }
    if (s >= len - 1) {
      s = len - 1;
      w = 0;
    }
    if (pair_inside && s == len - 1 && len >= 2) {  // keep the pair inside the span: (len-2, len-1) with weight one
      s = len - 2;
      w = one;
    }
    t0[i] = start + s;
    w1[i] = w;
  }
}

// Nearest with half-pixel centres: output i takes source floor((i + 0.5) * len / n),
// computed exactly in integers (OpenCV INTER_NEAREST_EXACT; TFLite ResizeNearestNeighbor
// with half_pixel_centers=True).
void nearest_taps(int start, int len, int n, std::vector<int32_t>& t0, std::vector<int32_t>& w1) {
  t0.resize(n);
  w1.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const int64_t s = ((2 * static_cast<int64_t>(i) + 1) * len) / (2 * static_cast<int64_t>(n));
    t0[i] = start + static_cast<int32_t>(std::min<int64_t>(s, len - 1));
  }
}

// Area (box) taps: output i covers source [i*len/n, (i+1)*len/n); each source sample
// weighs its overlap. Weights are differences of rounded cumulative positions, so each
// output's weights sum to exactly 2^kAreaBits.
void area_taps(int start, int len, int n, std::vector<int32_t>& tap_start, std::vector<int32_t>& tap_index,
               std::vector<int32_t>& tap_weight) {
  const int64_t one = int64_t{1} << kAreaBits;
  tap_start.assign(1, 0);
  tap_index.clear();
  tap_weight.clear();
  for (int i = 0; i < n; ++i) {
    // positions scaled by n: output i spans [i*len, (i+1)*len)
    const int64_t a = static_cast<int64_t>(i) * len, b = a + len;
    auto cumulative = [&](int64_t t) { return ((t - a) * one * 2 + len) / (2 * len); };  // round half up
    for (int64_t s = a / n; s * n < b; ++s) {
      const int64_t lo = std::max(a, s * n), hi = std::min(b, (s + 1) * n);
      const int64_t w = cumulative(hi) - cumulative(lo);
      if (w > 0) {
        tap_index.push_back(start + static_cast<int32_t>(s));
        tap_weight.push_back(static_cast<int32_t>(w));
      }
    }
    tap_start.push_back(static_cast<int32_t>(tap_index.size()));
  }
}

// 4:2:0 chroma sample of luma sample t is t / 2 (OpenCV's cvtColor repeats each chroma
// sample over its 2x2 block). A luma tap pair (t, t+1) maps to the chroma pair
// (t/2, t/2 + 1) when t is odd, else to t/2 alone.
void chroma_linear(const std::vector<int32_t>& t0, const std::vector<int32_t>& w1, std::vector<int32_t>& c0,
                   std::vector<int32_t>& cw1) {
  c0.resize(t0.size());
  cw1.resize(t0.size());
  for (size_t i = 0; i < t0.size(); ++i) {
    c0[i] = t0[i] >> 1;
    cw1[i] = (w1[i] > 0 && (t0[i] & 1)) ? w1[i] : 0;
  }
}

void chroma_area(const std::vector<int32_t>& start, const std::vector<int32_t>& index,
                 const std::vector<int32_t>& weight, std::vector<int32_t>& cstart, std::vector<int32_t>& cindex,
                 std::vector<int32_t>& cweight) {
  cstart.assign(1, 0);
  cindex.clear();
  cweight.clear();
  for (size_t i = 0; i + 1 < start.size(); ++i) {
    const size_t first = cindex.size();
    for (int32_t k = start[i]; k < start[i + 1]; ++k) {
      const int32_t c = index[k] >> 1;
      if (cindex.size() > first && cindex.back() == c) {
        cweight.back() += weight[k];
      } else {
        cindex.push_back(c);
        cweight.push_back(weight[k]);
      }
    }
    cstart.push_back(static_cast<int32_t>(cindex.size()));
  }
}

void validate(const PlanRequest& r) {
  if (r.src_w <= 0 || r.src_h <= 0)
    throw std::invalid_argument("image size must be positive, got " + str(r.src_w) + "x" + str(r.src_h));
  if (is_yuv420(r.format) && (r.src_w % 2 || r.src_h % 2))
    throw std::invalid_argument("4:2:0 YUV images need even width and height, got " + str(r.src_w) + "x" +
                                str(r.src_h));
  if (r.format == Format::kYUYV && r.src_w % 2)
    throw std::invalid_argument("YUYV images need an even width, got " + str(r.src_w));
  if (r.roi_w <= 0 || r.roi_h <= 0)
    throw std::invalid_argument("ROI size must be positive, got " + str(r.roi_w) + "x" + str(r.roi_h));
  if (r.roi_x < 0 || r.roi_y < 0 || r.roi_x > r.src_w - r.roi_w || r.roi_y > r.src_h - r.roi_h)
    throw std::invalid_argument("ROI (x=" + str(r.roi_x) + ", y=" + str(r.roi_y) + ", w=" + str(r.roi_w) + ", h=" +
                                str(r.roi_h) + ") lies outside the " + str(r.src_w) + "x" + str(r.src_h) + " image");
  // The plan's tables grow with the ROI and the output, and column offsets are int32
  // bytes from the ROI's first column: both are bounded before anything is allocated.
  if (r.roi_w > kMaxRoiSide || r.roi_h > kMaxRoiSide)
    throw std::invalid_argument("ROI size must be at most " + str(kMaxRoiSide) + " pixels per side, got " +
                                str(r.roi_w) + "x" + str(r.roi_h));
  if (r.out_w <= 0 || r.out_h <= 0 || r.out_w > kMaxOutputSide || r.out_h > kMaxOutputSide)
    throw std::invalid_argument("output size must be in [1, " + str(kMaxOutputSide) + "] per side, got " +
                                str(r.out_w) + "x" + str(r.out_h));
  if (r.out_c != 1 && r.out_c != 3) throw std::invalid_argument("output channels must be 1 or 3, got " + str(r.out_c));
  if (r.threads < 1 || r.threads > kMaxThreads)
    throw std::invalid_argument("threads must be in [1, " + str(kMaxThreads) + "], got " + str(r.threads));
  if (!(r.qmin <= r.qmax)) throw std::invalid_argument("qmin must not exceed qmax");
}

// Byte index of colour c (0 R, 1 G, 2 B) in a packed pixel.
int packed_index(Format f, int c) {
  const bool bgr_order = f == Format::kBGR || f == Format::kBGRA;
  return bgr_order ? 2 - c : c;
}

HPass make_pass(int plane, int nch, bool planar, int bpp, std::array<int, 3> i0, int tap_stride) {
  HPass p;
  p.plane = plane;
  p.nch = nch;
  p.planar = planar;
  p.bpp = bpp;
  for (int c = 0; c < 3; ++c) {
    p.i0[c] = static_cast<uint8_t>(i0[c]);
    p.i1[c] = static_cast<uint8_t>(i0[c] + tap_stride);
  }
  return p;
}

// HPass::chunk_*: the blocks of 16 pixels, from the left, whose chunks (16 bytes from
// each pair's first window) lie inside the row and hold both windows of their pair.
// Stops at the first block that does not (downscales beyond about 12x for one channel,
// 6x for NV12 chroma, and the right edge); SIMD paths do the rest with 4-byte windows.
void plan_chunks(HPass& pass, int row_bytes) {
  pass.simd_end16 = 0;
  pass.chunk_offset.clear();
  pass.chunk_control.clear();
  if (!pass.window4()) return;
  const int nch = pass.nch == 1 ? 1 : 2;
  const int last_tap = nch == 1 ? pass.i1[0] : std::max(pass.i1[0], pass.i1[1]);
  const int blocks = static_cast<int>(pass.offset.size()) / 16;
  for (int block = 0; block < blocks; ++block) {
    int32_t chunk[8];
    uint8_t control[64];
    std::fill(control, control + 64, 0x80);
    const int32_t* offset = pass.offset.data() + 16 * block;
    for (int j = 0; j < 8; ++j) {
      const int p = 2 * j;  // block pixel of the pair's first window
      chunk[j] = offset[p];
      if (chunk[j] + 16 > row_bytes || offset[p + 1] - chunk[j] + last_tap > 15) return;
      for (int s = 0; s < 2; ++s)
        for (int c = 0; c < nch; ++c)
          for (int t = 0; t < 2; ++t)
            control[32 * chunk_register(nch, p + s) + chunk_byte(nch, p + s, c, t)] =
                static_cast<uint8_t>(offset[p + s] - chunk[j] + (t ? pass.i1[c] : pass.i0[c]));
    }
    pass.chunk_offset.insert(pass.chunk_offset.end(), chunk, chunk + 8);
    pass.chunk_control.insert(pass.chunk_control.end(), control, control + 32 * nch);
    pass.simd_end16 = 16 * (block + 1);
  }
}

// The affine stage's integer outputs as int16 steps (see Stage::int_map): for a shift k,
// finds a multiplier c + m / 2^16 (c in {0, 1}, m < 2^16) and an add such that
// clamp((v * c + ((v * m) >> 16) + add) >> k, lo, hi) equals the float reference
// quantize(v * scale + bias) for every v in [0, 32767] (inputs are at most
// 255 * 128 = 32640), with v * c + ((v * m) >> 16) + add inside int16. For a given
// (k, c, m) the admissible adds form an interval, the intersection of one interval per
// v, so the check is exhaustive and exact: no rounding argument is needed. It succeeds
// for the usual image quantizations (e.g. (p - 127.5) / 127.5 at scale 1/128, raw
// levels); where float rounding near .5 cannot be matched at 16-bit precision it fails
// and the float stage runs.
constexpr int kMapMaxV = 32767;

// The reference's integer output for every input v, exactly as scalar.cc computes it.
std::vector<int32_t> affine_outputs(const Channel& ch, float qmin, float qmax) {
  std::vector<int32_t> want(kMapMaxV + 1);
  for (int v = 0; v <= kMapMaxV; ++v) {
    float x = static_cast<float>(v) * ch.scale + ch.bias;
    x = x > qmin ? x : qmin;
    x = x < qmax ? x : qmax;
    want[v] = static_cast<int32_t>(std::nearbyint(x));
  }
  return want;
}

bool fixed_map(const std::vector<int32_t>& want, float scale, int k, int32_t lo, int32_t hi, int16_t& c_out,
               uint16_t& m_out, int16_t& add) {
  const double ideal = static_cast<double>(scale) * std::ldexp(1.0, 16 + k);
  if (!(ideal > 0) || ideal >= 65536.0 * 2) return false;  // t spans at most 2^16 (it must fit int16 after add)
  for (int dm : {0, 1, -1, 2, -2}) {
    const int64_t total = std::llround(ideal) + dm;
    if (total < 0 || total >= 2 * 65536) continue;  // c is 0 or 1: SIMD paths take v & -c, not a multiply
    const int64_t c = total >> 16, m = total & 0xffff;
    const int64_t t_max = kMapMaxV * c + ((kMapMaxV * m) >> 16);  // t grows with v; t(0) = 0
    int64_t a_lo = -32768, a_hi = 32767 - t_max;
    for (int v = 0; v <= kMapMaxV && a_lo <= a_hi; ++v) {
      const int64_t t = v * c + ((v * m) >> 16);
      const int64_t q = want[v];
      // (t + add) >> k must be q; or at most lo when q == lo, at least hi when q == hi
      const int64_t step = int64_t{1} << k;  // q may be negative: multiply, not shift
      if (q > lo) a_lo = std::max(a_lo, q * step - t);
      if (q < hi) a_hi = std::min(a_hi, (q + 1) * step - 1 - t);
    }
    if (a_lo <= a_hi) {
      c_out = static_cast<int16_t>(c);
      m_out = static_cast<uint16_t>(m);
      add = static_cast<int16_t>(a_lo);
      return true;
    }
  }
  return false;
}

// Fills st's integer map when every channel of the stage has one with a common shift.
void plan_int_map(Stage& st) {
  if (st.type == OutType::kFloat32) return;
  const float lo = std::nearbyint(st.qmin), hi = std::nearbyint(st.qmax);
  const float tmin = st.type == OutType::kInt8 ? -128.0f : 0.0f, tmax = st.type == OutType::kInt8 ? 127.0f : 255.0f;
  if (!(lo >= tmin && hi <= tmax)) return;
  std::vector<int32_t> want[3];
  for (int c = 0; c < st.period; ++c) {
    if (!(st.ch[c].scale > 0) || !std::isfinite(st.ch[c].bias)) return;
    want[c] = affine_outputs(st.ch[c], st.qmin, st.qmax);
  }
  for (int k = 14; k >= 0; --k) {  // the finest step that fits 16 bits first
    uint16_t mul[3];
    int16_t whole[3], add[3];
    bool ok = true;
    for (int c = 0; c < st.period && ok; ++c)
      ok = fixed_map(want[c], st.ch[c].scale, k, static_cast<int32_t>(lo), static_cast<int32_t>(hi), whole[c], mul[c],
                     add[c]);
    if (!ok) continue;
    st.int_map = true;
    st.shift = k;
    st.lo = static_cast<int16_t>(lo);
    st.hi = static_cast<int16_t>(hi);
    for (int j = 0; j < 48; ++j) {
      st.iwhole[j] = whole[j % st.period];
      st.imul[j] = mul[j % st.period];
      st.iadd[j] = add[j % st.period];
    }
    return;
  }
}

}  // namespace

Plan build_plan(const PlanRequest& r) {
  validate(r);
  Plan p;
  p.format = r.format;
  p.resize = r.resize;
  p.out_type = r.out_type;
  p.nchw = r.nchw;
  p.src_w = r.src_w;
  p.src_h = r.src_h;
  p.roi_x = r.roi_x;
  p.roi_y = r.roi_y;
  p.roi_w = r.roi_w;
  p.roi_h = r.roi_h;
  p.out_w = r.out_w;
  p.out_h = r.out_h;
  p.out_c = r.out_c;
  p.qmin = r.qmin;
  p.qmax = r.qmax;
  p.threads = r.threads;

  // Geometry: the ROI fills the output, or keeps its aspect ratio centred in it.
  p.dst_w = r.out_w;
  p.dst_h = r.out_h;
  if (r.letterbox) {
    const double s = std::min(static_cast<double>(r.out_w) / r.roi_w, static_cast<double>(r.out_h) / r.roi_h);
    p.dst_w = std::clamp(static_cast<int>(std::lround(r.roi_w * s)), 1, r.out_w);
    p.dst_h = std::clamp(static_cast<int>(std::lround(r.roi_h * s)), 1, r.out_h);
  }
  p.dst_x = (r.out_w - p.dst_w) / 2;
  p.dst_y = (r.out_h - p.dst_h) / 2;

  // Planes.
  const Format f = r.format;
  switch (f) {
    case Format::kRGB:
    case Format::kBGR:
      p.plane_bpp[0] = 3;
      break;
    case Format::kRGBA:
    case Format::kBGRA:
      p.plane_bpp[0] = 4;
      break;
    case Format::kYUYV:
      p.plane_bpp[0] = 2;
      break;
    default:
      p.plane_bpp[0] = 1;
  }
  p.plane_w[0] = r.src_w;
  p.plane_h[0] = r.src_h;
  if (f == Format::kNV12 || f == Format::kNV21) {
    p.planes = 2;
    p.plane_w[1] = r.src_w / 2;
    p.plane_h[1] = r.src_h / 2;
    p.plane_bpp[1] = 2;
  } else if (f == Format::kI420) {
    p.planes = 3;
    for (int k = 1; k < 3; ++k) {
      p.plane_w[k] = r.src_w / 2;
      p.plane_h[k] = r.src_h / 2;
      p.plane_bpp[k] = 1;
    }
  }

  // Passes and the colour stage's inputs.
  const int out_c = r.out_c;
  const bool planar = r.nchw;
  auto out_colour = [&](int c) { return r.bgr_out ? 2 - c : c; };  // output channel -> 0 R, 1 G, 2 B
  if (!is_yuv(f) && f != Format::kGray) {
    const int bpp = p.plane_bpp[0];
    if (out_c == 3) {
      p.passes.push_back(make_pass(
          0, 3, planar, bpp,
          {packed_index(f, out_colour(0)), packed_index(f, out_colour(1)), packed_index(f, out_colour(2))}, bpp));
    } else {  // luma from R, G, B planes
      p.matrix = true;
      p.passes.push_back(make_pass(0, 3, true, bpp, {packed_index(f, 0), packed_index(f, 1), packed_index(f, 2)}, bpp));
      p.inputs = {{{0, 0}, {0, 1}, {0, 2}}};
    }
  } else if (f == Format::kGray) {
    const int nch = (out_c == 3 && !planar) ? 3 : 1;  // NHWC: replicate into the three channels
    p.passes.push_back(make_pass(0, nch, false, 1, {0, 0, 0}, 1));
  } else {
    p.yuv = true;
    const int nch = 1;
    const bool yuyv = f == Format::kYUYV;
    const int ybpp = yuyv ? 2 : 1;
    p.passes.push_back(make_pass(0, nch, false, ybpp, {0, 0, 0}, ybpp));
    if (out_c == 3) {
      int uplane = 1, vplane = 1, cbpp = 2, ui = 0, vi = 1;
      if (f == Format::kNV21) std::swap(ui, vi);
      if (f == Format::kI420) {
        vplane = 2;
        cbpp = 1;
        vi = 0;
      }
      if (yuyv) {
        uplane = vplane = 0;
        cbpp = 4;
        ui = 1;
        vi = 3;
      }
      if (uplane == vplane) {  // interleaved U and V: one pass, two planar channels
        HPass uv = make_pass(uplane, 2, true, cbpp, {ui, vi, 0}, cbpp);
        uv.chroma_rows = is_yuv420(f);
        p.passes.push_back(uv);
        p.inputs = {{{0, 0}, {1, 0}, {1, 1}}};
      } else {
        HPass u = make_pass(uplane, nch, false, cbpp, {ui, ui, ui}, cbpp);
        HPass v = make_pass(vplane, nch, false, cbpp, {vi, vi, vi}, cbpp);
        u.chroma_rows = v.chroma_rows = true;
        p.passes.push_back(u);
        p.passes.push_back(v);
        p.inputs = {{{0, 0}, {1, 0}, {2, 0}}};
      }
    }
  }

  // Resampling tables.
  const bool yuyv = f == Format::kYUYV;
  std::vector<int32_t> lx0, lw1, cx0, cw1;
  std::vector<int32_t> lxs, lxi, lxw, cxs, cxi, cxw;
  if (r.resize == Resize::kArea) {
    area_taps(r.roi_x, r.roi_w, p.dst_w, lxs, lxi, lxw);
    chroma_area(lxs, lxi, lxw, cxs, cxi, cxw);
    area_taps(r.roi_y, r.roi_h, p.dst_h, p.luma.tap_start, p.luma.tap_row, p.luma.tap_weight);
    chroma_area(p.luma.tap_start, p.luma.tap_row, p.luma.tap_weight, p.chroma.tap_start, p.chroma.tap_row,
                p.chroma.tap_weight);
  } else {
    if (r.resize == Resize::kNearest) {
      nearest_taps(r.roi_x, r.roi_w, p.dst_w, lx0, lw1);
      nearest_taps(r.roi_y, r.roi_h, p.dst_h, p.luma.row0, p.luma.b1);
    } else {
      linear_taps(r.roi_x, r.roi_w, p.dst_w, kHBits, true, lx0, lw1);
      linear_taps(r.roi_y, r.roi_h, p.dst_h, kVBits, false, p.luma.row0, p.luma.b1);
    }
    chroma_linear(lx0, lw1, cx0, cw1);
    chroma_linear(p.luma.row0, p.luma.b1, p.chroma.row0, p.chroma.b1);
    for (VTable* t : {&p.luma, &p.chroma}) {
      t->disjoint = true;
      for (size_t y = 0; y + 1 < t->row0.size(); ++y)
        if (t->row0[y] + (t->b1[y] ? 1 : 0) >= t->row0[y + 1]) t->disjoint = false;
    }
  }

  // Column offsets. A frame row may be wider than int32 can count (a 2 GiB row), but the
  // ROI's span is bounded (validate): offsets are taken in 64 bits, then kept in int32 as
  // bytes from the first byte each plane's passes read, Plan::col_base (area: the start of
  // the accumulated span).
  std::vector<std::vector<int64_t>> absolute(p.passes.size());
  for (size_t i = 0; i < p.passes.size(); ++i) {
    HPass& pass = p.passes[i];
    // Chroma columns: 4:2:0 planes and YUYV's U/V (one sample per two pixels).
    const bool chroma_cols = pass.plane > 0 || (yuyv && pass.bpp == 4);
    if (r.resize == Resize::kArea) {
      pass.tap_start = chroma_cols ? cxs : lxs;
      pass.tap_weight = chroma_cols ? cxw : lxw;
      for (int32_t column : chroma_cols ? cxi : lxi) absolute[i].push_back(int64_t{column} * pass.bpp);
    } else {
      for (int32_t column : chroma_cols ? cx0 : lx0) absolute[i].push_back(int64_t{column} * pass.bpp);
    }
  }
  std::array<int64_t, 3> span_end{};
  p.col_base.fill(INT64_MAX);
  for (size_t i = 0; i < p.passes.size(); ++i) {
    const HPass& pass = p.passes[i];
    // area: the byte span its taps' channels cover (i0 of each channel); linear: tap 0 on
    const int lo = r.resize == Resize::kArea ? *std::min_element(pass.i0.begin(), pass.i0.begin() + pass.nch) : 0;
    const int hi = *std::max_element(pass.i0.begin(), pass.i0.begin() + pass.nch);
    p.col_base[pass.plane] = std::min(p.col_base[pass.plane], absolute[i].front() + lo);
    span_end[pass.plane] = std::max(span_end[pass.plane], absolute[i].back() + hi + 1);
  }
  for (int k = 0; k < 3; ++k) {
    if (p.col_base[k] == INT64_MAX) p.col_base[k] = span_end[k] = 0;  // a plane no pass reads
    p.span_bytes[k] = static_cast<int>(span_end[k] - p.col_base[k]);
  }

  for (size_t i = 0; i < p.passes.size(); ++i) {
    HPass& pass = p.passes[i];
    const int64_t base = p.col_base[pass.plane];
    const bool chroma_cols = pass.plane > 0 || (yuyv && pass.bpp == 4);
    const int64_t plane_row_bytes =
        chroma_cols && yuyv ? int64_t{r.src_w} * 2 : int64_t{p.plane_w[pass.plane]} * p.plane_bpp[pass.plane];
    // bytes of the row from the base on, as far as any window can reach
    const int row_bytes = static_cast<int>(std::min<int64_t>(plane_row_bytes - base, p.span_bytes[pass.plane] + 64));
    if (r.resize == Resize::kArea) {
      pass.tap_offset.resize(absolute[i].size());
      for (size_t k = 0; k < absolute[i].size(); ++k) pass.tap_offset[k] = static_cast<int32_t>(absolute[i][k] - base);
      continue;
    }
    const auto& w1 = chroma_cols ? cw1 : lw1;
    pass.offset.resize(p.dst_w);
    pass.wpair.resize(p.dst_w);
    pass.wpair_neg.resize(p.dst_w);
    pass.simd_end8 = pass.simd_end4 = 0;
    for (int x = 0; x < p.dst_w; ++x) {
      pass.offset[x] = static_cast<int32_t>(absolute[i][x] - base);
      pass.wpair[x] = static_cast<uint16_t>((kHOne - w1[x]) | (w1[x] << 8));
      pass.wpair_neg[x] = static_cast<uint16_t>(((w1[x] - kHOne) & 0xff) | ((-w1[x] & 0xff) << 8));
      // offsets never decrease, so the pixels with an in-row window form a prefix
      if (pass.offset[x] + kWindow <= row_bytes) pass.simd_end8 = x + 1;
      if (pass.offset[x] + 4 <= row_bytes) pass.simd_end4 = x + 1;
    }
    plan_chunks(pass, row_bytes);
  }

  // Colour stage. Affine mode: output = (v / 128) * scale + bias (YUV: v is the colour of
  // the fixed-point conversion, in 1/128 levels). Matrix mode (RGB -> gray): the colour in
  // pixel levels first, clamped to [0, 255], then * scale + bias.
  for (int c = 0; c < out_c; ++c) {
    Channel& ch = p.channel[c];
    const float scale = r.scale[c], bias = r.bias[c];
    if (!p.matrix) {
      ch.scale = scale / kHOne;
      ch.bias = bias;
      continue;
    }
    ch.scale = scale;
    ch.bias = bias;
    const double u = 1.0 / kHOne;           // inputs are in 1/128 levels
    ch.k1 = static_cast<float>(0.299 * u);  // BT.601 luma from R, G, B
    ch.k2 = static_cast<float>(0.587 * u);
    ch.k3 = static_cast<float>(0.114 * u);
  }
  if (p.yuv) {
    // BT.601: limited range Y in [16, 235], chroma in [16, 240]; full range (JPEG) all [0, 255].
    const bool limited = r.yuv_range == YuvRange::kLimited;
    const double cy = limited ? 1.164 : 1.0;
    const double cvr = limited ? 1.596 : 1.402, cug = limited ? 0.391 : 0.344136;
    const double cvg = limited ? 0.813 : 0.714136, cub = limited ? 2.018 : 1.772;
    double ku[3] = {0, 0, 0}, kv[3] = {0, 0, 0};
    for (int c = 0; c < out_c; ++c) {
      const int colour = out_c == 3 ? out_colour(c) : -1;  // -1: luma only
      if (colour == 0) kv[c] = cvr;
      if (colour == 1) ku[c] = -cug, kv[c] = -cvg;
      if (colour == 2) ku[c] = cub;
    }
    // the smallest shift that brings a plane's largest coefficient below 1 in Q15
    auto shift_for = [](double m) { return m < 1.0 ? 0 : (m < 2.0 ? 1 : 2); };
    auto q15 = [](double k, int s) { return static_cast<int16_t>(std::lround(std::ldexp(k, 15 - s))); };
    double mu = 0, mv = 0;
    for (int c = 0; c < out_c; ++c) mu = std::max(mu, std::fabs(ku[c])), mv = std::max(mv, std::fabs(kv[c]));
    Yuv y;
    y.y_off = static_cast<int16_t>(limited ? 16 * 32 : 0);
    y.sy = shift_for(cy);
    y.su = shift_for(mu);
    y.sv = shift_for(mv);
    y.ky = q15(cy, y.sy);
    for (int c = 0; c < out_c; ++c) {
      y.ku[c] = q15(ku[c], y.su);
      y.kv[c] = q15(kv[c], y.sv);
    }
    y.nch = out_c;
    p.yuv_row = y;
    for (int c = 0; c < out_c; ++c) {
      Yuv& one = p.yuv_plane[c];
      one = y;
      one.nch = 1;
      one.ku = {y.ku[c], 0, 0};
      one.kv = {y.kv[c], 0, 0};
    }
  }
  // Stages: one for an NHWC row (channels interleaved), one per channel plane for NCHW.
  for (int g = 0; g < (r.nchw ? out_c : 1); ++g) {
    Stage& st = p.stage[g];
    st.period = r.nchw ? 1 : out_c;
    for (int c = 0; c < st.period; ++c) st.ch[c] = p.channel[r.nchw ? g : c];
    st.type = r.out_type;
    st.qmin = r.qmin;
    st.qmax = r.qmax;
    st.expand = false;
    const bool full_range = (r.out_type == OutType::kInt8 && r.qmin == -128 && r.qmax == 127) ||
                            (r.out_type == OutType::kUInt8 && r.qmin == 0 && r.qmax == 255);
    double bound = 0;  // largest |value| before quantization
    for (int c = 0; c < st.period; ++c) {
      const Channel& ch = st.ch[c];
      const double in = p.matrix ? 255.0 : 32767.0;  // matrix: clamped levels; affine: 1/128 units
      bound = std::max(bound, in * std::fabs(ch.scale) + std::fabs(ch.bias));
    }
    st.saturating = full_range && bound < 1e9;
    for (int j = 0; j < 24; ++j) {
      const Channel& ch = st.ch[j % st.period];
      const float row[6] = {ch.k0, ch.k1, ch.k2, ch.k3, ch.scale, ch.bias};
      for (int k = 0; k < 6; ++k) st.pattern[k][j] = row[k];
    }
    if (!p.matrix) plan_int_map(st);
  }
  for (int c = 0; c < out_c; ++c) {
    const float v = r.pad[c] * r.scale[c] + r.bias[c];
    p.pad_value[c] = r.out_type == OutType::kFloat32 ? v : std::nearbyint(std::min(std::max(v, r.qmin), r.qmax));
  }
  return p;
}

}  // namespace edgeinf::preprocess
