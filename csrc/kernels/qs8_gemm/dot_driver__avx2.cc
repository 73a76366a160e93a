// The driver of the VPDPBUSD GEMM (dot_gemm.h): blocks of rows gathered once into uint8
// (a + 128), tiles of up to mr rows by 16 columns from the ISA's micro-kernel, and the
// AVX2 epilogue. The driver has no instruction beyond AVX2; the micro-kernel carries the
// ISA's.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "../../quant/rq_avx2_inl.h"
#include "dot_gemm.h"
#include "gemm.h"

namespace edgeinf::qs8 {
namespace {

constexpr size_t kNr = kDotLayout.nr;

// Rows per block: a block's uint8 rows stay within about 96 KB (L2), and a block
// is a multiple of mr rows; blocks of equal height, as in the AVX2 GEMM.
size_t block_rows(size_t m, size_t kp, size_t mr) {
  const size_t fit = std::max(mr, (96 * 1024 / kp) / mr * mr);
  const size_t mblocks = (m + fit - 1) / fit;
  return round_up((m + mblocks - 1) / mblocks, mr);
}

// Row m0 + r of A, offset to uint8, into dst[r * kp, (r + 1) * kp), zeros after K
// (the weights there are zero).
void gather_u8(const GemmRows& a, size_t m0, size_t rows, uint8_t* dst, size_t kp) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const size_t taps = a.taps, seg = a.seg;  // locals: the byte stores may alias `a`
  const int8_t* const* first = a.ptrs + m0 * taps;
  // Rows that lie back to back without padding (a pointwise convolution's pixels): one pass
  // over the whole block.
  bool dense = taps == 1 && seg == kp;
  for (size_t r = 1; dense && r < rows; ++r) dense = first[r] == first[0] + r * seg;
  if (dense) {
    const int8_t* s = first[0];
    const size_t bytes = rows * seg;
    size_t i = 0;
    for (; i + 32 <= bytes; i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_xor_si256(v, flip));
    }
    for (; i < bytes; ++i) dst[i] = static_cast<uint8_t>(s[i]) ^ 0x80u;
    return;
  }
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* d = dst + r * kp;
    const int8_t* const* segs = a.ptrs + (m0 + r) * taps;
    for (size_t t = 0; t < taps; ++t, d += seg) {
      const int8_t* s = segs[t];
      size_t i = 0;
      for (; i + 32 <= seg; i += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_xor_si256(v, flip));
      }
      if (i + 16 <= seg) {  // short segments (a few channels) in 16- and 8-byte pieces
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_xor_si128(v, _mm256_castsi256_si128(flip)));
        i += 16;
      }
      if (i + 8 <= seg) {
        uint64_t v;
        std::memcpy(&v, s + i, sizeof(v));
        v ^= 0x8080808080808080u;
        std::memcpy(d + i, &v, sizeof(v));
        i += 8;
      }
      for (; i < seg; ++i) d[i] = static_cast<uint8_t>(s[i]) ^ 0x80u;
    }
    std::fill(d, dst + (r + 1) * kp, uint8_t{0});
  }
}

}  // namespace

void qs8_gemm_dot(const DotTiles& tiles, const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  if (a.m == 0) return;
  const size_t n = w.n(), kp = round_up(a.k(), kDotLayout.kpad), mr = tiles.mr, nc = tiles.nc;
  const int8_t* packed = w.packed(kDotLayout);
  const size_t panel_bytes = kp * kNr, blocks = (n + kNr - 1) / kNr;
  const size_t mc = block_rows(a.m, kp, mr);
  uint8_t* abuf = scratch<uint8_t, 0>(mc * kp);
  // The accumulators of nc panels: [panel][row][16].
  const size_t acc_stride = mc * kNr;
  int32_t* partial = scratch<int32_t, 2>(nc * acc_stride);
  const int32_t* start = w.bias_minus_u8_zero_point_terms();
  const FloatRequantization* fl = w.float_requantization();
  // The tiles requantize where they can (the float form, rounding to nearest); else the
  // AVX2 epilogue runs on their accumulators.
  const bool float_form = fl != nullptr && tiles.requantizes && avx2_rq::rounds_to_nearest();
  const Requantization& rq = w.requantization();
  for (size_t m0 = 0; m0 < a.m; m0 += mc) {
    const size_t rows = std::min(mc, a.m - m0);
    gather_u8(a, m0, rows, abuf, kp);
    for (size_t j = 0; j < blocks; j += nc) {
      const size_t panels = std::min(nc, blocks - j);
      const DotTileRow& by_rows = tiles.panels[panels];
      const int8_t* panel = packed + j * panel_bytes;
      const size_t col0 = j * kNr;
      DotOutput o{};
      if (float_form) {
        o = DotOutput{fl->scale.data() + col0,
                      fl->offset.data() + col0,
                      fl->offset_neg.data() + col0,
                      fl->split,
                      rq.act_min,
                      rq.act_max,
                      nullptr,
                      out_stride,
                      std::min(panels * kNr, n - col0)};
      }
      for (size_t r0 = 0; r0 < rows; r0 += mr) {
        o.out = out + (m0 + r0) * out_stride + col0;
        by_rows.tile[std::min(mr, rows - r0)](abuf + r0 * kp, kp, kp / 4, panel, panel_bytes, start + col0,
                                              partial + r0 * kNr, acc_stride, float_form ? &o : nullptr);
      }
      if (float_form) continue;
      for (size_t c = 0; c < panels; ++c) {
        const size_t c0 = col0 + c * kNr;
        qs8_gemm_requantize_rows__avx2(w, c0, std::min(kNr, n - c0), partial + c * acc_stride, rows,
                                       out + m0 * out_stride + c0, out_stride);
      }
    }
  }
}

}  // namespace edgeinf::qs8
