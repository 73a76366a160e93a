// Every kernel's entry point, in one place: each picks the variant of the active path
// through dispatch.h's select(), at each call, so that EDGEINF_ISA and set_active_isa()
// reach every kernel alike. A variant that is null (not built for this target, or not
// written for that ISA) falls back along neondot -> neon -> scalar and {avx512vnni,
// avx2vnni, avx2-emulated-vnni} -> avx2 -> scalar. The variants themselves live in
// kernels/<dtype>_<op>/{scalar,avx2,avx2vnni,avx512vnni,neon,neondot}.cc.
#include <utility>

#include "../dispatch.h"
#include "qs8_binary/binary.h"
#include "qs8_conv2d/conv2d.h"
#include "qs8_dwconv2d/dwconv2d.h"
#include "qs8_gemm/dot_gemm.h"
#include "qs8_gemm/gemm.h"
#include "qs8_logistic/logistic.h"
#include "qs8_pool/pool.h"
#include "qs8_quantize/quantize.h"
#include "qs8_requantize/requantize.h"
#include "qs8_softmax/softmax.h"
#include "u8_image_to_tensor/image_to_tensor.h"
#include "u8_image_to_tensor/warp_affine.h"

namespace edgeinf {
namespace qs8 {

void qs8_requantize(const int32_t* acc, int8_t* out, size_t rows, size_t channels, const Requantization& rq) {
  using Fn = void (*)(const int32_t*, int8_t*, size_t, size_t, const Requantization&);
  select<Fn>(&qs8_requantize__scalar, EDGEINF_AVX2(qs8_requantize__avx2), EDGEINF_NEON(qs8_requantize__neon),
             EDGEINF_NEON(qs8_requantize__neon))(acc, out, rows, channels, rq);
}

void qs8_quantize(const float* x, int8_t* q, size_t n, float scale, int32_t zero_point) {
  using Fn = void (*)(const float*, int8_t*, size_t, float, int32_t);
  select<Fn>(&qs8_quantize__scalar, EDGEINF_AVX2(qs8_quantize__avx2), EDGEINF_NEON(qs8_quantize__neon),
             EDGEINF_NEON(qs8_quantize__neon))(x, q, n, scale, zero_point);
}

void qs8_dequantize(const int8_t* q, float* x, size_t n, float scale, int32_t zero_point) {
  using Fn = void (*)(const int8_t*, float*, size_t, float, int32_t);
  select<Fn>(&qs8_dequantize__scalar, EDGEINF_AVX2(qs8_dequantize__avx2), EDGEINF_NEON(qs8_dequantize__neon),
             EDGEINF_NEON(qs8_dequantize__neon))(q, x, n, scale, zero_point);
}

namespace {

using GemmFn = void (*)(const GemmWeights&, const GemmRows&, int8_t*, size_t);

GemmFn gemm_variant() {
  const VnniVariants<GemmFn> vnni{EDGEINF_AVX2VNNI(qs8_gemm__avx2vnni), EDGEINF_AVX512VNNI(qs8_gemm__avx512vnni),
                                  EDGEINF_AVX2(qs8_gemm__avx2_emulated_vnni), EDGEINF_AVX512AMX(qs8_gemm__avx512amx)};
  return select<GemmFn>(&qs8_gemm__scalar, EDGEINF_AVX2(qs8_gemm__avx2), EDGEINF_NEON(qs8_gemm__neon),
                        EDGEINF_NEONDOT(qs8_gemm__neondot), vnni);
}

}  // namespace

void qs8_gemm(const GemmWeights& w, const GemmRows& a, int8_t* out, size_t out_stride) {
  gemm_variant()(w, a, out, out_stride);
}

const char* qs8_gemm_variant_name() {
  const GemmFn fn = gemm_variant();
  const std::pair<GemmFn, const char*> names[] = {
      {EDGEINF_AVX2(qs8_gemm__avx2), "avx2"},
      {EDGEINF_AVX2VNNI(qs8_gemm__avx2vnni), "avx2vnni"},
      {EDGEINF_AVX512VNNI(qs8_gemm__avx512vnni), "avx512vnni"},
      {EDGEINF_AVX2(qs8_gemm__avx2_emulated_vnni), "avx2-emulated-vnni"},
      {EDGEINF_AVX512AMX(qs8_gemm__avx512amx), "avx512amx"},
      {EDGEINF_NEON(qs8_gemm__neon), "neon"},
      {EDGEINF_NEONDOT(qs8_gemm__neondot), "neondot"},
  };
  for (const auto& [variant, name] : names) {
    if (variant != nullptr && variant == fn) return name;
  }
  return "scalar";
}

namespace {

void conv2d_gemm(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  qs8_conv2d__gemm(w.gemm(), g, in, out);
}

}  // namespace

// The weights were prepared for one of three algorithms (ConvWeights): a direct kernel,
// the AVX2 direct kernel only, or the GEMM, which then dispatches to its own variant.
// The VPDPBUSD paths run few input channels (a 3-channel stem) on their tiles over whole
// copied windows (K in quads across the taps), convolutions of several taps on their
// indirect tiles (qs8_conv2d_indirect_dot: channels a multiple of 4, else the GEMM), and
// every other convolution on their GEMM.
void qs8_conv2d(const ConvWeights& w, const ConvGeometry& g, const int8_t* in, int8_t* out) {
  using Fn = void (*)(const ConvWeights&, const ConvGeometry&, const int8_t*, int8_t*);
  if (w.direct()) {
    const VnniVariants<Fn> vnni_direct{EDGEINF_AVX2VNNI(qs8_conv2d_direct__avx2vnni),
                                       EDGEINF_AVX512VNNI(qs8_conv2d_direct__avx512vnni),
                                       EDGEINF_AVX2(qs8_conv2d_direct__avx2_emulated_vnni)};
    select<Fn>(&qs8_conv2d__scalar, EDGEINF_AVX2(qs8_conv2d_direct__avx2), EDGEINF_NEON(qs8_conv2d_direct__neon),
               EDGEINF_NEONDOT(qs8_conv2d_direct__neondot), vnni_direct)(w, g, in, out);
    return;
  }
  const Fn simd = &conv2d_gemm;
  const VnniVariants<Fn> vnni{simd, simd, simd};
  if (w.avx2_direct()) {
    select<Fn>(&qs8_conv2d__scalar, EDGEINF_AVX2(qs8_conv2d_direct__avx2), simd, simd, vnni)(w, g, in, out);
    return;
  }
  const VnniVariants<Fn> vnni_indirect{
      EDGEINF_AVX2VNNI(qs8_conv2d_indirect__avx2vnni), EDGEINF_AVX512VNNI(qs8_conv2d_indirect__avx512vnni),
      EDGEINF_AVX2(qs8_conv2d_indirect__avx2_emulated_vnni), EDGEINF_AVX512AMX(qs8_conv2d_indirect__avx512amx)};
  select<Fn>(&qs8_conv2d__scalar, EDGEINF_AVX2(qs8_conv2d_gemm__avx2), simd, simd, vnni_indirect)(w, g, in, out);
}

void qs8_dwconv2d(const DwWeights& w, const DwGeometry& g, const int8_t* in, int8_t* out) {
  using Fn = void (*)(const DwWeights&, const DwGeometry&, const int8_t*, int8_t*);
  select<Fn>(&qs8_dwconv2d__scalar, EDGEINF_AVX2(qs8_dwconv2d__avx2), EDGEINF_NEON(qs8_dwconv2d__neon),
             EDGEINF_NEONDOT(qs8_dwconv2d__neondot),
             {nullptr, EDGEINF_AVX512VNNI(qs8_dwconv2d__avx512vnni), nullptr})(w, g, in, out);
}

void qs8_maxpool(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  using Fn = void (*)(const PoolGeometry&, const int8_t*, int8_t*);
  select<Fn>(&qs8_maxpool__scalar, EDGEINF_AVX2(qs8_maxpool__avx2), EDGEINF_NEON(qs8_maxpool__neon),
             EDGEINF_NEON(qs8_maxpool__neon))(g, in, out);
}

void qs8_avgpool(const PoolGeometry& g, const int8_t* in, int8_t* out) {
  using Fn = void (*)(const PoolGeometry&, const int8_t*, int8_t*);
  select<Fn>(&qs8_avgpool__scalar, EDGEINF_AVX2(qs8_avgpool__avx2), EDGEINF_NEON(qs8_avgpool__neon),
             EDGEINF_NEON(qs8_avgpool__neon))(g, in, out);
}

void qs8_add(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const AddParams& p) {
  using Fn = void (*)(const int8_t*, const int8_t*, int8_t*, size_t, const AddParams&);
  select<Fn>(&qs8_add__scalar, EDGEINF_AVX2(qs8_add__avx2), EDGEINF_NEON(qs8_add__neon), EDGEINF_NEON(qs8_add__neon))(
      a, b, out, n, p);
}

void qs8_add_prepared(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const PreparedAdd& add) {
  using Fn = void (*)(const int8_t*, const int8_t*, int8_t*, size_t, const AddLinear&);
  VnniVariants<Fn> avx512;  // the AVX-512 variant rides on the avx512vnni path
  avx512.avx512vnni = EDGEINF_AVX512VNNI(qs8_add_linear__avx512);
  const Fn linear = add.linear
                        ? select<Fn>(nullptr, EDGEINF_AVX2(qs8_add_linear__avx2), EDGEINF_NEON(qs8_add_linear__neon),
                                     EDGEINF_NEON(qs8_add_linear__neon), avx512)
                        : nullptr;
  if (linear) {
    linear(a, b, out, n, *add.linear);
  } else {
    qs8_add(a, b, out, n, add.params);
  }
}

void qs8_mul(const int8_t* a, const int8_t* b, int8_t* out, size_t n, const MulParams& p) {
  using Fn = void (*)(const int8_t*, const int8_t*, int8_t*, size_t, const MulParams&);
  select<Fn>(&qs8_mul__scalar, EDGEINF_AVX2(qs8_mul__avx2), EDGEINF_NEON(qs8_mul__neon), EDGEINF_NEON(qs8_mul__neon))(
      a, b, out, n, p);
}

// AVX2 has no byte table lookup wider than 16 entries: the scalar loop serves that path.
void qs8_lut(const int8_t* in, int8_t* out, size_t n, const int8_t table[256]) {
  using Fn = void (*)(const int8_t*, int8_t*, size_t, const int8_t*);
  select<Fn>(&qs8_lut__scalar, nullptr, EDGEINF_NEON(qs8_lut__neon), EDGEINF_NEON(qs8_lut__neon))(in, out, n, table);
}

// The table variant is portable C++, faster than the step-by-step reference wherever a
// SIMD path runs; the scalar path keeps the reference.
void qs8_softmax(const int8_t* in, int8_t* out, size_t rows, size_t depth, const SoftmaxParams& p) {
  using Fn = void (*)(const int8_t*, int8_t*, size_t, size_t, const SoftmaxParams&);
  const Fn table = &qs8_softmax__table;
  select<Fn>(&qs8_softmax__scalar, table, table, table)(in, out, rows, depth, p);
}

}  // namespace qs8

namespace preprocess {

const Kernels& active_kernels() {
  using Fn = const Kernels& (*)();
  return select<Fn>(&kernels__scalar, EDGEINF_AVX2(kernels__avx2), EDGEINF_NEON(kernels__neon),
                    EDGEINF_NEON(kernels__neon))();
}

void u8_warp_affine(const WarpPlan& plan, const uint8_t* src, float* out) {
  using Fn = void (*)(const WarpPlan&, const uint8_t*, float*, int, int);
  select<Fn>(&u8_warp_affine__scalar, EDGEINF_AVX2(u8_warp_affine__avx2), nullptr, nullptr)(plan, src, out, 0,
                                                                                            plan.out_h);
}

}  // namespace preprocess
}  // namespace edgeinf
