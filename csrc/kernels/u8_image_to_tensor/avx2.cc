// AVX2 image-to-tensor row primitives; bit-exact with scalar.cc (this file alone is
// compiled with -mavx2 -mfma; no FMA is used, the float stage must round like scalar).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "image_to_tensor.h"

namespace edgeinf::preprocess {
namespace {

inline __m128i load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm_cvtsi32_si128(v);
}

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Eight 4-byte windows, one per dword: pixels 0-3 in lane 0, 4-7 in lane 1.
inline __m256i load8x4(const uint8_t* row, const int32_t* o) {
  const __m128i a = _mm_unpacklo_epi64(_mm_unpacklo_epi32(load4(row + o[0]), load4(row + o[1])),
                                       _mm_unpacklo_epi32(load4(row + o[2]), load4(row + o[3])));
  const __m128i b = _mm_unpacklo_epi64(_mm_unpacklo_epi32(load4(row + o[4]), load4(row + o[5])),
                                       _mm_unpacklo_epi32(load4(row + o[6]), load4(row + o[7])));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

// Tap pairs are multiplied with VPMADDUBSW: unsigned pixels times the negated weights
// (HPass::wpair_neg, -128..0), so m = -(w0 * p0 + w1 * p1) exactly, no saturation and no
// bias. Blend of two such rows: h0 + ((h1 - h0) * b1 + 2^14) >> 15 (the scalar rounding)
// is PMULHRSW(m0 - m1, b1) - m0.
inline __m256i blend_negated(__m256i m0, __m256i m1, __m256i b) {
  return _mm256_sub_epi16(_mm256_mulhrs_epi16(_mm256_sub_epi16(m0, m1), b), m0);
}

inline __m256i negate(__m256i m) { return _mm256_sub_epi16(_mm256_setzero_si256(), m); }

// The resample loops request the rows of a later output row (LinePrefetch) one line of
// each row per iteration (16 pixels of 4-byte windows, 8 of 8-byte ones); LinePrefetch::flush
// requests the rest after the row. One line per step, spread over the row rather than in
// bursts: some cores (AMD Zen 1) drop prefetches issued faster than the misses drain, and
// a dropped prefetch costs the whole miss later (the cold cases of
// benchmarks/bench_preprocess.py measure this).
constexpr int kLinesPerStep = 1;

// `ahead`'s cursor held in locals, so that the loop's stores to `out` do not force
// reloads; save() hands the position back for LinePrefetch::flush.
struct LineCursor {
  explicit LineCursor(const LinePrefetch& ahead)
      : row0(ahead.row0), row1(ahead.row1), next(ahead.next), end(ahead.row0 ? ahead.end : 0) {}

  void request() {
    if (next >= end) return;
    for (int k = 0; k < kLinesPerStep * 64; k += 64) {
      __builtin_prefetch(row0 + next + k);
      __builtin_prefetch(row1 + next + k);
    }
    next += kLinesPerStep * 64;
  }
  void save(LinePrefetch& ahead) const { ahead.next = next; }

  const uint8_t* const row0;
  const uint8_t* const row1;
  int next;
  const int end;
};

// One or two planar channels from a 4-byte window per pixel (gray, Y, I420 U/V, NV12
// UV): 16 pixels per step. kTwoRows: resample row0 and row1 at the same columns and
// blend them vertically (a fused hblend).
template <bool kTwoRows, int kNch>
int hresample_4b(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int begin, int end,
                 int16_t* out, int plane_stride, LinePrefetch& ahead) {
  constexpr int nch = kNch;  // a constant: one general register fewer in a loop that spills
  // per lane, pair k of pixel k / 2 (dwords 0-3) takes bytes i0, i1 of its window; the
  // upper half of each lane is zero (0x80 + i keeps the zeroing bit)
  const __m256i window_base =
      _mm256_setr_epi8(0, 0, 4, 4, 8, 8, 12, 12, -128, -128, -128, -128, -128, -128, -128, -128, 0, 0, 4, 4, 8, 8, 12,
                       12, -128, -128, -128, -128, -128, -128, -128, -128);
  __m256i control[2];
  for (int c = 0; c < nch; ++c)
    control[c] = _mm256_add_epi8(window_base, _mm256_set1_epi16(static_cast<int16_t>(pass.i0[c] | pass.i1[c] << 8)));
  const __m256i bv = _mm256_set1_epi16(static_cast<int16_t>(b1));
  const int32_t* offsets = pass.offset.data();
  const uint16_t* wpairs = pass.wpair_neg.data();
  // lane 0: pixels 0-3 | 8-11, lane 1: pixels 4-7 | 12-15 (unpacklo of the two halves)
  auto products = [&](__m256i wa, __m256i wb, int c, __m256i w) {
    const __m256i ga = _mm256_shuffle_epi8(wa, control[c]), gb = _mm256_shuffle_epi8(wb, control[c]);
    return _mm256_maddubs_epi16(_mm256_unpacklo_epi64(ga, gb), w);
  };
  LineCursor lines(ahead);
  int x = begin;
  for (; x + 16 <= end; x += 16) {
    lines.request();
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wpairs + x));
    w = _mm256_permute4x64_epi64(w, _MM_SHUFFLE(3, 1, 2, 0));
    // windows loaded once for all channels, both rows of 8 pixels at a time; the empty asm
    // (ordered after the first half's windows) keeps the compiler from loading all 16
    // offsets up front, which spills registers in every step
    const int32_t* o = offsets + x;
    const __m256i a0 = load8x4(row0, o);
    const __m256i a1 = kTwoRows ? load8x4(row1, o) : a0;
    asm("" : "+r"(o) : "x"(a1));
    const __m256i b0 = load8x4(row0, o + 8);
    const __m256i b1v = kTwoRows ? load8x4(row1, o + 8) : b0;
    for (int c = 0; c < nch; ++c) {
      const __m256i m0 = products(a0, b0, c, w);
      const __m256i r = kTwoRows ? blend_negated(m0, products(a1, b1v, c, w), bv) : negate(m0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c * plane_stride + x),
                          _mm256_permute4x64_epi64(r, _MM_SHUFFLE(3, 1, 2, 0)));
    }
  }
  lines.save(ahead);
  return x;
}

// Chunks j and j + 4 of a block (HPass::chunk_offset) as the two lanes of one register,
// their bytes moved by `control`.
inline __m256i gather_chunks(const uint8_t* row, const int32_t* chunk, __m256i control, int j) {
  const __m256i both =
      _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + chunk[j]))),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + chunk[j + 4])), 1);
  return _mm256_shuffle_epi8(both, control);
}

// hresample_4b's work from 16-byte chunks (HPass::chunk_*, chunk_byte for the layout):
// per 16 pixels and row, 8 loads instead of 16, 4 VPSHUFB and 3 VPBLENDD instead of 14
// unpacks and inserts, and the pixels come out in order (no lane permutes). The loads
// are what bound these loops on Zen 1 (two per cycle).
template <bool kTwoRows, int kNch>
int hresample_chunks(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int end, int16_t* out,
                     int plane_stride, LinePrefetch& ahead) {
  const __m256i bv = _mm256_set1_epi16(static_cast<int16_t>(b1));
  // two channels: the weight pairs of pixels 0-3 | 8-11, twice per lane, and of 4-7 | 12-15
  const __m256i wselect0 =
      _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i wselect1 = _mm256_add_epi8(wselect0, _mm256_set1_epi8(8));
  const int32_t* chunk = pass.chunk_offset.data();
  const uint8_t* control = pass.chunk_control.data();
  const uint16_t* wpairs = pass.wpair_neg.data();
  LineCursor lines(ahead);
  int x = 0;
  for (; x + 16 <= end; x += 16, chunk += 8, control += 32 * kNch) {
    lines.request();
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wpairs + x));
    if (kNch == 1) {
      const __m256i c = load32(control);
      auto products = [&](const uint8_t* row) {
        const __m256i t01 = _mm256_blend_epi32(gather_chunks(row, chunk, c, 0), gather_chunks(row, chunk, c, 1), 0x22);
        const __m256i t23 = _mm256_blend_epi32(gather_chunks(row, chunk, c, 2), gather_chunks(row, chunk, c, 3), 0x88);
        return _mm256_maddubs_epi16(_mm256_blend_epi32(t01, t23, 0xcc), w);
      };
      const __m256i m0 = products(row0);
      const __m256i r = kTwoRows ? blend_negated(m0, products(row1), bv) : negate(m0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), r);
    } else {
      const __m256i c0 = load32(control), c1 = load32(control + 32);
      const __m256i w0 = _mm256_shuffle_epi8(w, wselect0), w1 = _mm256_shuffle_epi8(w, wselect1);
      auto products = [&](const uint8_t* row, int g, __m256i c, __m256i wg) {
        const __m256i taps =
            _mm256_blend_epi32(gather_chunks(row, chunk, c, 2 * g), gather_chunks(row, chunk, c, 2 * g + 1), 0xaa);
        return _mm256_maddubs_epi16(taps, wg);
      };
      const __m256i lo0 = products(row0, 0, c0, w0), hi0 = products(row0, 1, c1, w1);
      const __m256i lo = kTwoRows ? blend_negated(lo0, products(row1, 0, c0, w0), bv) : negate(lo0);
      const __m256i hi = kTwoRows ? blend_negated(hi0, products(row1, 1, c1, w1), bv) : negate(hi0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + x), _mm256_unpacklo_epi64(lo, hi));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + plane_stride + x), _mm256_unpackhi_epi64(lo, hi));
    }
  }
  lines.save(ahead);
  return x;
}

// VPSHUFB controls of the 8-byte-window kernel for one output layout. Per 128-bit lane
// (two pixels' windows), int16 slot k takes channel c of pixel p: its tap bytes are
// 8 * p + i0[c] and 8 * p + i1[c] (`pixel` holds 8 * p, `tap` the index of i0[c] / i1[c]
// in {i0[0], i1[0], i0[1], i1[1], i0[2], i1[2]}) and its weights the pair of the lane's
// pixel p (`weight`, over four broadcast pairs). Unused slots are 0x80 (zero).
struct WindowControls {
  uint8_t pixel[32], tap[32], weight[32];
};

constexpr WindowControls window_controls(bool planar, int nch) {
  WindowControls w{};
  for (int lane = 0; lane < 2; ++lane)
    for (int k = 0; k < 8; ++k) {
      const bool used = k < 2 * nch;
      const int p = planar ? k % 2 : k / nch;
      const int c = planar ? k / 2 : k % nch;
      for (int j = 0; j < 2; ++j) {
        const int i = 16 * lane + 2 * k + j;
        w.pixel[i] = used ? static_cast<uint8_t>(8 * p) : 0x80;
        w.tap[i] = used ? static_cast<uint8_t>(2 * c + j) : 0x80;
        w.weight[i] = used ? static_cast<uint8_t>(2 * (2 * lane + p) + j) : 0x80;
      }
    }
  return w;
}

// planar (or one channel) with 1, 2, 3 channels; interleaved with 2, 3
constexpr WindowControls kWindowControls[5] = {window_controls(true, 1), window_controls(true, 2),
                                               window_controls(true, 3), window_controls(false, 2),
                                               window_controls(false, 3)};

// One to three channels from an 8-byte window per pixel: 4 pixels per step, two per lane,
// two steps per iteration sharing one load of their 8 weight pairs.
template <bool kTwoRows, bool kPlanar>
int hresample_nch(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int end, int16_t* out,
                  int plane_stride, LinePrefetch& ahead) {
  const int nch = pass.nch;
  const WindowControls& layout = kWindowControls[kPlanar ? nch - 1 : nch + 1];
  const __m256i taps = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(static_cast<char>(pass.i0[0]), static_cast<char>(pass.i1[0]), static_cast<char>(pass.i0[1]),
                    static_cast<char>(pass.i1[1]), static_cast<char>(pass.i0[2]), static_cast<char>(pass.i1[2]), 0, 0,
                    0, 0, 0, 0, 0, 0, 0, 0));
  const __m256i pcontrol = _mm256_add_epi8(load32(layout.pixel), _mm256_shuffle_epi8(taps, load32(layout.tap)));
  // weights of pixels 0-3 and 4-7 of 8 broadcast pairs (the second step's bytes are 8 on;
  // 0x80 + 8 keeps the zeroing bit)
  const __m256i wcontrol0 = load32(layout.weight);
  const __m256i wcontrol1 = _mm256_add_epi8(wcontrol0, _mm256_set1_epi8(8));
  const __m256i bv = _mm256_set1_epi16(static_cast<int16_t>(b1));
  const int32_t* offsets = pass.offset.data();     // locals: the compiler cannot know that
  const uint16_t* wpairs = pass.wpair_neg.data();  // stores to `out` leave pass's vectors alone
  // four 8-byte loads beat VPGATHERDQ here (it stalls badly on these machines)
  auto products = [&](const uint8_t* row, const int32_t* o, __m256i w) {
    const __m128i w01 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + o[0])),
                                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + o[1])));
    const __m128i w23 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + o[2])),
                                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + o[3])));
    const __m256i win = _mm256_inserti128_si256(_mm256_castsi128_si256(w01), w23, 1);
    return _mm256_maddubs_epi16(_mm256_shuffle_epi8(win, pcontrol), w);
  };
  auto step = [&](int x, __m256i w) {
    const __m256i m0 = products(row0, offsets + x, w);
    const __m256i h = kTwoRows ? blend_negated(m0, products(row1, offsets + x, w), bv) : negate(m0);
    // lane 0 holds pixels 0-1, lane 1 pixels 2-3; two 128-bit stores instead of a lane
    // permute (VPERMD is three uops on AMD Zen 1)
    const __m128i lo = _mm256_castsi256_si128(h), hi = _mm256_extracti128_si256(h, 1);
    if (!kPlanar) {
      // a lane's first nch dwords are contiguous output; each store runs into the next
      // pixels' slots (written next) or the row slack
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + x * nch), lo);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (x + 2) * nch), hi);
    } else {
      // dword c of a lane is channel c of its two pixels
      const __m128i c01 = _mm_unpacklo_epi32(lo, hi);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + x), c01);
      if (nch >= 2) _mm_storel_epi64(reinterpret_cast<__m128i*>(out + plane_stride + x), _mm_unpackhi_epi64(c01, c01));
      if (nch == 3)
        _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 2 * plane_stride + x), _mm_unpackhi_epi32(lo, hi));
    }
  };
  int x = 0;
  LineCursor lines(ahead);
  for (; x + 8 <= end; x += 8) {
    lines.request();
    const __m256i w8 = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wpairs + x)));
    step(x, _mm256_shuffle_epi8(w8, wcontrol0));
    step(x + 4, _mm256_shuffle_epi8(w8, wcontrol1));
  }
  lines.save(ahead);
  if (x + 4 <= end) {
    long long wp;
    std::memcpy(&wp, wpairs + x, 8);
    step(x, _mm256_shuffle_epi8(_mm256_set1_epi64x(wp), wcontrol0));
    x += 4;
  }
  return x;
}

// The chunk gather as far as it reaches, then 4-byte windows.
template <bool kTwoRows, int kNch>
int hresample_window4(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int n, int16_t* out,
                      int plane_stride, LinePrefetch& ahead) {
  const int x =
      hresample_chunks<kTwoRows, kNch>(pass, row0, row1, b1, std::min(n, pass.simd_end16), out, plane_stride, ahead);
  return hresample_4b<kTwoRows, kNch>(pass, row0, row1, b1, x, std::min(n, pass.simd_end4), out, plane_stride, ahead);
}

template <bool kTwoRows>
int hresample_simd(const HPass& pass, const uint8_t* row0, const uint8_t* row1, int32_t b1, int n, int16_t* out,
                   int plane_stride, LinePrefetch& ahead) {
  if (pass.window4())
    return pass.nch == 1 ? hresample_window4<kTwoRows, 1>(pass, row0, row1, b1, n, out, plane_stride, ahead)
                         : hresample_window4<kTwoRows, 2>(pass, row0, row1, b1, n, out, plane_stride, ahead);
  if (pass.planar || pass.nch == 1)
    return hresample_nch<kTwoRows, true>(pass, row0, row1, b1, std::min(n, pass.simd_end8), out, plane_stride, ahead);
  return hresample_nch<kTwoRows, false>(pass, row0, row1, b1, std::min(n, pass.simd_end8), out, plane_stride, ahead);
}

constexpr auto hresample = hresample_then_scalar<hresample_simd<false>>;
constexpr auto hblend = hblend_then_scalar<hresample_simd<true>>;

void vblend(const int16_t* h0, const int16_t* h1, int32_t b1, int n, int16_t* out) {
  // PMULHRSW: (d * b1 * 2 + 2^15) >> 16 == (d * b1 + 2^14) >> 15, the scalar rounding
  const __m256i b = _mm256_set1_epi16(static_cast<int16_t>(b1));
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h0 + i));
    const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h1 + i));
    const __m256i d = _mm256_mulhrs_epi16(_mm256_sub_epi16(a1, a0), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_add_epi16(a0, d));
  }
  s16_vblend__scalar(h0, h1, b1, i, n, out);
}

void accumulate(const uint8_t* row, int n, int32_t w, int32_t* acc, bool init) {
  const __m256i wv = _mm256_set1_epi32(w);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i)));
    __m256i v = _mm256_mullo_epi32(p, wv);
    if (!init) v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + i), v);
  }
  u8_accumulate__scalar(row, i, n, w, acc, init);
}

// A row of the stage's pattern: the channels' constant over a 24-element block.
struct Pattern {
  __m256 v[3];
};

inline Pattern pattern(const Stage& st, int row) {
  const float* f = st.pattern[row];
  return {{_mm256_loadu_ps(f), _mm256_loadu_ps(f + 8), _mm256_loadu_ps(f + 16)}};
}

inline __m256 to_float(const int16_t* v) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v))));
}

// Writes 24 results: floats as they are, integers clamped, rounded half to even (the
// default MXCSR mode, as nearbyint) and packed.
inline void store24(const __m256 x[3], OutType type, bool saturating, const __m256 lo, const __m256 hi, void* out,
                    int i) {
  if (type == OutType::kFloat32) {
    float* o = static_cast<float*>(out) + i;
    for (int k = 0; k < 3; ++k) _mm256_storeu_ps(o + 8 * k, x[k]);
    return;
  }
  __m256i q[3];
  for (int k = 0; k < 3; ++k) q[k] = _mm256_cvtps_epi32(saturating ? x[k] : _mm256_min_ps(_mm256_max_ps(x[k], lo), hi));
  const __m256i a = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), _MM_SHUFFLE(3, 1, 2, 0));
  const __m256i b = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[2]), _MM_SHUFFLE(3, 1, 2, 0));
  const __m256i bytes = type == OutType::kInt8 ? _mm256_packs_epi16(a, b) : _mm256_packus_epi16(a, b);
  const __m256i ordered = _mm256_permute4x64_epi64(bytes, _MM_SHUFFLE(3, 1, 2, 0));
  uint8_t* o = static_cast<uint8_t*>(out) + i;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm256_castsi256_si128(ordered));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(o + 16), _mm256_extracti128_si256(ordered, 1));
}

// Integer outputs by the stage's proven int16 map (Stage::int_map): 48 elements per step,
// no float conversion. Values are clamped to [lo, hi] inside the type, so the saturating
// packs are exact; when [lo, hi] is the type's whole range (Stage::saturating) the packs
// are the clamp (the mapped values are int16).
void affine_int(const int16_t* v, int n, const Stage& st, void* out) {
  __m256i whole[3], mul[3], add[3];
  for (int k = 0; k < 3; ++k) {
    whole[k] = negate(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(st.iwhole + 16 * k)));  // 0 or -1
    mul[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(st.imul + 16 * k));
    add[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(st.iadd + 16 * k));
  }
  const __m128i shift = _mm_cvtsi32_si128(st.shift);
  const __m256i lo = _mm256_set1_epi16(st.lo), hi = _mm256_set1_epi16(st.hi);
  const bool s8 = st.type == OutType::kInt8;
  uint8_t* o = static_cast<uint8_t*>(out);
  int i = 0;
  for (; i + 48 <= n; i += 48) {
    __m256i y[3];
    for (int k = 0; k < 3; ++k) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i + 16 * k));
      // the sums wrap mod 2^16: the true total is in int16
      const __m256i prod = _mm256_add_epi16(_mm256_and_si256(x, whole[k]), _mm256_mulhi_epu16(x, mul[k]));
      const __m256i t = _mm256_add_epi16(prod, add[k]);
      y[k] = _mm256_sra_epi16(t, shift);
      if (!st.saturating) y[k] = _mm256_min_epi16(_mm256_max_epi16(y[k], lo), hi);
    }
    // each vector's two halves packed together: no lane permute (three uops on Zen 1)
    for (int k = 0; k < 3; ++k) {
      const __m128i a = _mm256_castsi256_si128(y[k]), b = _mm256_extracti128_si256(y[k], 1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i + 16 * k), s8 ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b));
    }
  }
  s16_affine__scalar(v, i, n, st, out);
}

void affine(const int16_t* v, int n, const Stage& st, void* out) {
  if (st.int_map) return affine_int(v, n, st, out);
  const Pattern s = pattern(st, 4), b = pattern(st, 5);
  const __m256 lo = _mm256_set1_ps(st.qmin), hi = _mm256_set1_ps(st.qmax);
  int i = 0;
  for (; i + 24 <= n; i += 24) {
    __m256 x[3];
    for (int k = 0; k < 3; ++k) x[k] = _mm256_add_ps(_mm256_mul_ps(to_float(v + i + 8 * k), s.v[k]), b.v[k]);
    store24(x, st.type, st.saturating, lo, hi, out, i);
  }
  s16_affine__scalar(v, i, n, st, out);
}

// Three 8-element groups of one value per pixel repeated x3 (v0 v0 v0 v1 v1 v1 v2 v2 | ...),
// from 8 pixels' values: 24 interleaved elements.
inline void expand3(const int16_t* v, __m256 f[3]) {
  // convert once, then repeat in the float domain (exact either way)
  const __m256 x = to_float(v);
  f[0] = _mm256_permutevar8x32_ps(x, _mm256_setr_epi32(0, 0, 0, 1, 1, 1, 2, 2));
  f[1] = _mm256_permutevar8x32_ps(x, _mm256_setr_epi32(2, 3, 3, 3, 4, 4, 4, 5));
  f[2] = _mm256_permutevar8x32_ps(x, _mm256_setr_epi32(5, 5, 6, 6, 6, 7, 7, 7));
}

void matrix(const int16_t* a0, const int16_t* a1, const int16_t* a2, int n, const Stage& st, void* out) {
  const Pattern k0 = pattern(st, 0), k1 = pattern(st, 1), k2 = pattern(st, 2), k3 = pattern(st, 3);
  const Pattern s = pattern(st, 4), b = pattern(st, 5);
  const bool expand = st.expand;
  const __m256 lo = _mm256_set1_ps(st.qmin), hi = _mm256_set1_ps(st.qmax);
  const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
  int i = 0;
  for (; i + 24 <= n; i += 24) {
    __m256 f0[3], f1[3], f2[3];
    if (expand) {
      expand3(a0 + i / 3, f0);
      expand3(a1 + i / 3, f1);
      expand3(a2 + i / 3, f2);
    } else {
      for (int k = 0; k < 3; ++k) {
        f0[k] = to_float(a0 + i + 8 * k);
        f1[k] = to_float(a1 + i + 8 * k);
        f2[k] = to_float(a2 + i + 8 * k);
      }
    }
    __m256 x[3];
    for (int k = 0; k < 3; ++k) {
      __m256 t = _mm256_add_ps(k0.v[k], _mm256_mul_ps(k1.v[k], f0[k]));
      t = _mm256_add_ps(t, _mm256_mul_ps(k2.v[k], f1[k]));
      t = _mm256_add_ps(t, _mm256_mul_ps(k3.v[k], f2[k]));
      t = _mm256_min_ps(_mm256_max_ps(t, zero), top);
      x[k] = _mm256_add_ps(_mm256_mul_ps(t, s.v[k]), b.v[k]);
    }
    store24(x, st.type, st.saturating, lo, hi, out, i);
  }
  s16_matrix__scalar(a0, a1, a2, i, n, st, out);
}

// The YUV planes' down shifts 2 - s (Yuv::sy, su, sv) as one template constant, or
// kAnyDown for the plan's at run time.
constexpr int kAnyDown = -1;
constexpr int down_code(int sy, int su, int sv) { return (2 - sy) | (2 - su) << 2 | (2 - sv) << 4; }
// BT.601's shifts (plan.cc's shift_for): limited range Y 1.164, U up to 2.018, V 1.596;
// full range 1.0, 1.772, 1.402
constexpr int kLimitedDown = down_code(1, 2, 1), kFullDown = down_code(1, 1, 1);

// Fixed-point YUV -> RGB of 16 pixels (see Yuv and s16_yuv_rgb__scalar): T is PMULHRSW.
// Lane 0 of each channel holds pixels 0-7, lane 1 pixels 8-15.
struct YuvConvert {
  explicit YuvConvert(const Yuv& k)
      : sy(_mm_cvtsi32_si128(2 - k.sy)),
        su(_mm_cvtsi32_si128(2 - k.su)),
        sv(_mm_cvtsi32_si128(2 - k.sv)),
        ybias(_mm256_set1_epi16(static_cast<int16_t>(2 - 4 * k.y_off))),
        ky(_mm256_set1_epi16(k.ky)) {
    for (int c = 0; c < 3; ++c) {
      ku[c] = _mm256_set1_epi16(k.ku[c]);
      kv[c] = _mm256_set1_epi16(k.kv[c]);
    }
  }

  // kZero (zero_products): products whose coefficient is 0 are skipped, as T(x, 0) = 0 and
  // the int16 sums wrap, so their order does not matter either.
  // kDown (down_code): the planes' 2 - s known at compile time, as immediate shifts (none
  // for s = 2), or kAnyDown: the plan's, as shifts by a register.
  template <int kNch, int kZero, int kDown = kAnyDown>
  void operator()(const int16_t* y, const int16_t* u, const int16_t* v, __m256i ch[3]) const {
    const __m256i cbias = _mm256_set1_epi16(2 - 4 * 4096), top = _mm256_set1_epi16(255 * 32);
    constexpr bool known = kDown != kAnyDown;
    const __m256i ys = load < known ? (kDown & 3) : -1 > (y, ybias, sy);
    const __m256i us = load < known ? (kDown >> 2 & 3) : -1 > (u, cbias, su);
    const __m256i vs = load < known ? (kDown >> 4 & 3) : -1 > (v, cbias, sv);
    const __m256i luma = _mm256_mulhrs_epi16(ys, ky);
    for (int c = 0; c < kNch; ++c) {
      __m256i x = luma;
      if (!(kZero >> c & 1)) x = _mm256_add_epi16(x, _mm256_mulhrs_epi16(us, ku[c]));
      if (!(kZero >> (3 + c) & 1)) x = _mm256_add_epi16(x, _mm256_mulhrs_epi16(vs, kv[c]));
      ch[c] = _mm256_slli_epi16(_mm256_min_epi16(_mm256_max_epi16(x, _mm256_setzero_si256()), top), 2);
    }
  }

  // ((x + 2) >> 2) - off) << s in three operations: with b = x + 2 - 4 * off (in int16 for
  // x in [0, 255 * 128]), that is (b & ~3) >> (2 - s), as 4 * off is a multiple of 4 and
  // s <= 2 (shift_for in plan.cc). kShift: 2 - s, or -1 for `down`'s.
  template <int kShift>
  static __m256i load(const int16_t* p, __m256i bias, __m128i down) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i b = _mm256_and_si256(_mm256_add_epi16(x, bias), _mm256_set1_epi16(~3));
    if (kShift < 0) return _mm256_sra_epi16(b, down);
    return kShift ? _mm256_srai_epi16(b, kShift) : b;
  }

  __m128i sy, su, sv;  // 2 - s of each plane
  __m256i ybias, ky, ku[3], kv[3];
};

// Bit c: ku[c] == 0, bit 3 + c: kv[c] == 0. BT.601 RGB has one of each (R takes no U, B no
// V): two of the six chroma products, all on one pipe on Zen 1, are not needed.
int zero_products(const Yuv& k) {
  int z = 0;
  for (int c = 0; c < 3; ++c) z |= (k.ku[c] == 0) << c | (k.kv[c] == 0) << (3 + c);
  return z;
}
constexpr int kRgbZeros = 1 << 0 | 1 << (3 + 2), kBgrZeros = 1 << 2 | 1 << (3 + 0);

// Calls body(std::integral_constant<int, kZero>) with the plan's pattern when it is one of
// the two usual ones (the general form otherwise).
template <class Body>
int with_zero_products(const Yuv& k, Body&& body) {
  const int z = zero_products(k);
  if (z == kRgbZeros) return body(std::integral_constant<int, kRgbZeros>{});
  if (z == kBgrZeros) return body(std::integral_constant<int, kBgrZeros>{});
  return body(std::integral_constant<int, 0>{});
}

// with_zero_products, and the shifts of BT.601 in either range made immediates:
// body(zero, down) with std::integral_constants for YuvConvert.
template <class Body>
int with_yuv_constants(const Yuv& k, Body&& body) {
  const int down = down_code(k.sy, k.su, k.sv);
  return with_zero_products(k, [&](auto zero) {
    if (decltype(zero)::value != 0 && down == kLimitedDown)
      return body(zero, std::integral_constant<int, kLimitedDown>{});
    if (decltype(zero)::value != 0 && down == kFullDown) return body(zero, std::integral_constant<int, kFullDown>{});
    return body(zero, std::integral_constant<int, kAnyDown>{});
  });
}

// PSHUFB controls [kJ][kC], the same in both 128-bit lanes: byte t of control (j, c) is
// byte(j, c, t). ctl(j, c) loads one.
template <int kJ, int kC>
struct ShuffleControls {
  alignas(32) uint8_t b[kJ][kC][32];
  __m256i operator()(int j, int c) const { return _mm256_load_si256(reinterpret_cast<const __m256i*>(b[j][c])); }
};

template <int kJ, int kC, class Byte>
ShuffleControls<kJ, kC> shuffle_controls(Byte byte) {
  ShuffleControls<kJ, kC> controls{};
  for (int j = 0; j < kJ; ++j)
    for (int c = 0; c < kC; ++c)
      for (int t = 0; t < 16; ++t) controls.b[j][c][t] = controls.b[j][c][16 + t] = byte(j, c, t);
  return controls;
}

// Three channels are interleaved per 128-bit lane by PSHUFB, then the lanes are put in order.
template <int kNch, int kZero>
int yuv_rgb_simd(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, int16_t* out) {
  const YuvConvert convert(k);
  // interleave controls: output vector j of a lane takes element e = 8j + t from channel e % 3, pixel e / 3
  static const auto ctl = shuffle_controls<3, 3>([](int j, int c, int t) {
    const int e = 8 * j + t / 2;
    return e % 3 == c ? static_cast<uint8_t>(2 * (e / 3) + t % 2) : uint8_t{0x80};
  });
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i ch[3];
    convert.operator()<kNch, kZero>(y + i, u + i, v + i, ch);
    if (kNch == 1) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), ch[0]);
      continue;
    }
    __m256i o[3];
    for (int j = 0; j < 3; ++j) {
      o[j] = _mm256_or_si256(_mm256_shuffle_epi8(ch[0], ctl(j, 0)), _mm256_shuffle_epi8(ch[1], ctl(j, 1)));
      o[j] = _mm256_or_si256(o[j], _mm256_shuffle_epi8(ch[2], ctl(j, 2)));
    }
    // lane 0 holds pixels 0-7 (o0 o1 o2), lane 1 pixels 8-15
    __m256i* dst = reinterpret_cast<__m256i*>(out + 3 * i);
    _mm256_storeu_si256(dst, _mm256_permute2x128_si256(o[0], o[1], 0x20));
    _mm256_storeu_si256(dst + 1, _mm256_permute2x128_si256(o[2], o[0], 0x30));
    _mm256_storeu_si256(dst + 2, _mm256_permute2x128_si256(o[1], o[2], 0x31));
  }
  return i;
}

void yuv_rgb(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, int16_t* out) {
  int i = 0;
  if (k.nch == 1) i = yuv_rgb_simd<1, 0>(y, u, v, n, k, out);
  if (k.nch == 3)
    i = with_zero_products(k, [&](auto zero) { return yuv_rgb_simd<3, decltype(zero)::value>(y, u, v, n, k, out); });
  s16_yuv_rgb__scalar(y, u, v, i, n, k, out);
}

// yuv_rgb and affine_int fused, 16 pixels per step: each channel is mapped with its own
// constants (element i * nch + c has channel c, as nch is the stage's period), packed to
// bytes, and the three channels interleaved by PSHUFB per lane (24 bytes each).
template <int kNch, int kZero, int kDown>
int yuv_quantize_simd(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, const Stage& st,
                      uint8_t* out) {
  const YuvConvert convert(k);
  __m256i whole[3], mul[3], add[3];
  for (int c = 0; c < kNch; ++c) {
    whole[c] = _mm256_set1_epi16(static_cast<int16_t>(-st.iwhole[c]));  // 0 or -1: v * iwhole is v & whole
    mul[c] = _mm256_set1_epi16(static_cast<int16_t>(st.imul[c]));
    add[c] = _mm256_set1_epi16(st.iadd[c]);
  }
  const __m128i shift = _mm_cvtsi32_si128(st.shift);
  const __m256i lo = _mm256_set1_epi16(st.lo), hi = _mm256_set1_epi16(st.hi);
  const bool s8 = st.type == OutType::kInt8, saturating = st.saturating;  // locals: not reloaded after stores
  // byte e = 16j + t of a lane's 24 comes from channel e % 3 of pixel e / 3: channels 0 and 1
  // are in the pack of (0, 1) at p and 8 + p, channel 2 in the pack of (2, 2) at p
  static const auto ctl = shuffle_controls<2, 2>([](int j, int m, int t) {
    const int e = 16 * j + t, p = e / 3, c = e % 3;
    if (e < 24 && (m == 0 ? c < 2 : c == 2)) return static_cast<uint8_t>(m == 0 ? 8 * c + p : p);
    return uint8_t{0x80};
  });
  auto pack = [&](__m256i a, __m256i b) { return s8 ? _mm256_packs_epi16(a, b) : _mm256_packus_epi16(a, b); };
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i ch[3];
    convert.operator()<kNch, kZero, kDown>(y + i, u + i, v + i, ch);
    for (int c = 0; c < kNch; ++c) {
      // the sums wrap mod 2^16: the true total is in int16 (see affine_int)
      const __m256i prod = _mm256_add_epi16(_mm256_and_si256(ch[c], whole[c]), _mm256_mulhi_epu16(ch[c], mul[c]));
      const __m256i t = _mm256_sra_epi16(_mm256_add_epi16(prod, add[c]), shift);
      ch[c] = saturating ? t : _mm256_min_epi16(_mm256_max_epi16(t, lo), hi);
    }
    uint8_t* o = out + kNch * i;
    if (kNch == 1) {
      const __m256i bytes = _mm256_permute4x64_epi64(pack(ch[0], ch[0]), _MM_SHUFFLE(3, 1, 2, 0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm256_castsi256_si128(bytes));
      continue;
    }
    const __m256i a = pack(ch[0], ch[1]), b = pack(ch[2], ch[2]);
    const __m256i first = _mm256_or_si256(_mm256_shuffle_epi8(a, ctl(0, 0)), _mm256_shuffle_epi8(b, ctl(0, 1)));
    const __m256i last = _mm256_or_si256(_mm256_shuffle_epi8(a, ctl(1, 0)), _mm256_shuffle_epi8(b, ctl(1, 1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm256_castsi256_si128(first));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + 16), _mm256_castsi256_si128(last));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 24), _mm256_extracti128_si256(first, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(o + 40), _mm256_extracti128_si256(last, 1));
  }
  return i;
}

void yuv_quantize(const int16_t* y, const int16_t* u, const int16_t* v, int n, const Yuv& k, const Stage& st,
                  void* out) {
  int i = 0;
  uint8_t* o = static_cast<uint8_t*>(out);
  if (k.nch == 1) i = yuv_quantize_simd<1, 0, kAnyDown>(y, u, v, n, k, st, o);
  if (k.nch == 3)
    i = with_yuv_constants(k, [&](auto zero, auto down) {
      return yuv_quantize_simd<3, decltype(zero)::value, decltype(down)::value>(y, u, v, n, k, st, o);
    });
  s16_yuv_quantize__scalar(y, u, v, i, n, k, st, out);
}

}  // namespace

const Kernels& kernels__avx2() {
  static const Kernels k{hresample, hblend, vblend,  accumulate,   s32_area_reduce__avx2,
                         affine,    matrix, yuv_rgb, yuv_quantize, u8_accumulate_rows__avx2};
  return k;
}

}  // namespace edgeinf::preprocess
