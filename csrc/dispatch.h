// Run-time choice of the kernel path (scalar reference, AVX2, AVX2 with AVX-VNNI, AVX-512
// VNNI, AVX-512 VNNI with AMX, NEON, NEON with dot product).
//
// A path is usable when it was built for this target (setup.py defines EDGEINF_BUILD_*)
// and the CPU supports it (cpuid / getauxval). The active path is the best usable one
// unless EDGEINF_ISA (read once, at the first kernel call or when the native module
// loads, whichever comes first) or a test forces another. It is read at each kernel call:
// every kernel's entry point (kernels/dispatch.cc) calls select() with its variants, so
// no kernel family keeps a table of its own.
#pragma once

#include <string>

namespace edgeinf {

// kAvx2Vnni and kAvx512Vnni run the int8 GEMM with VPDPBUSD (VEX ymm and EVEX zmm forms),
// kAvx512Vnni the depthwise convolution on zmm too, and every other kernel on AVX2.
// kAvx512Amx runs the int8 GEMM on AMX tiles (TDPBUSD) and everything else as kAvx512Vnni.
// kAvx2EmulatedVnni is a test path: the same GEMM with VPDPBUSD emulated exactly by AVX2
// instructions, so that everything around the one instruction is tested on CPUs without it.
// It is never picked on its own (best_isa) nor listed (kPublicIsas); set_active_isa() takes
// it by name.
enum class Isa : int {
  kScalar = 0,
  kAvx2 = 1,
  kNeon = 2,
  kNeonDot = 3,
  kAvx2Vnni = 4,
  kAvx512Vnni = 5,
  kAvx2EmulatedVnni = 6,
  kAvx512Amx = 7
};
inline constexpr Isa kPublicIsas[] = {Isa::kScalar,    Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512Vnni,
                                      Isa::kAvx512Amx, Isa::kNeon, Isa::kNeonDot};

struct CpuInfo {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx_vnni = false;     // VEX VPDPBUSD on ymm (Alder Lake, Sapphire Rapids, Zen 5)
  bool avx512_vnni = false;  // with AVX512F and BW and the OS saving zmm state (Ice Lake, Zen 4)
  // AMX-TILE and AMX-INT8 with the OS saving tile state and granting this process its use
  // (Linux's ARCH_REQ_XCOMP_PERM): Sapphire Rapids and later Xeons
  bool amx_int8 = false;
  bool neon = false;
  bool dotprod = false;  // SDOT/UDOT (Armv8.2 DotProd): A76 and later, not A53/A72
  bool i8mm = false;
  // The Arm core this process started on, from MIDR_EL1 (aarch64 Linux): read by MRS where
  // the kernel emulates it for user space (HWCAP_CPUID; qemu-user gives its emulated core's),
  // else from sysfs. Null where unknown. Boards with one kind of core (every Raspberry Pi)
  // give the same answer on any core.
  const char* arm_core = nullptr;  // "cortex-a72", ...
  // Whether that core issues out of order (A57, A72, A73, ...): one ISA, two best schedules
  // where the in-order A53/A55 stall on chains that an out-of-order core hides.
  bool arm_out_of_order = false;
};

const CpuInfo& cpu_info();
bool isa_built(Isa isa);
bool isa_supported(Isa isa);  // built for this target and the CPU has it
Isa best_isa();
Isa active_isa();
void set_active_isa(Isa isa);  // throws std::invalid_argument when not supported
const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // throws std::invalid_argument
// Forces the path named by the EDGEINF_ISA environment variable, if set and not empty.
// Throws std::invalid_argument (naming the variable) for an unknown or unusable path.
void apply_isa_environment();

// The variants of a kernel that has VPDPBUSD paths (see Isa).
template <class Fn>
struct VnniVariants {
  Fn avx2vnni = nullptr, avx512vnni = nullptr, avx2_emulated = nullptr, avx512amx = nullptr;
};

// Returns the variant for the active path, falling back along neondot -> neon -> scalar,
// avx512amx -> avx512vnni and {avx512vnni, avx2vnni, avx2-emulated-vnni} -> avx2 -> scalar
// when a variant is null (not built, or not written for that ISA).
template <class Fn>
Fn select(Fn scalar, Fn avx2, Fn neon, Fn neondot, VnniVariants<Fn> vnni = {}) {
  switch (active_isa()) {
    case Isa::kAvx512Amx:
      if (vnni.avx512amx) return vnni.avx512amx;
      [[fallthrough]];
    case Isa::kAvx512Vnni:
      if (vnni.avx512vnni) return vnni.avx512vnni;
      if (avx2) return avx2;
      return scalar;
    case Isa::kAvx2Vnni:
      if (vnni.avx2vnni) return vnni.avx2vnni;
      if (avx2) return avx2;
      return scalar;
    case Isa::kAvx2EmulatedVnni:
      if (vnni.avx2_emulated) return vnni.avx2_emulated;
      if (avx2) return avx2;
      return scalar;
    case Isa::kNeonDot:
      if (neondot) return neondot;
      [[fallthrough]];
    case Isa::kNeon:
      if (neon) return neon;
      return scalar;
    case Isa::kAvx2:
      if (avx2) return avx2;
      return scalar;
    case Isa::kScalar:
      break;
  }
  return scalar;
}

}  // namespace edgeinf

// Take the address of a variant only when its file was compiled for this target.
#if defined(EDGEINF_BUILD_AVX2)
#define EDGEINF_AVX2(fn) (&(fn))
#else
#define EDGEINF_AVX2(fn) (nullptr)
#endif
#if defined(EDGEINF_BUILD_AVX2VNNI)
#define EDGEINF_AVX2VNNI(fn) (&(fn))
#else
#define EDGEINF_AVX2VNNI(fn) (nullptr)
#endif
#if defined(EDGEINF_BUILD_AVX512VNNI)
#define EDGEINF_AVX512VNNI(fn) (&(fn))
#else
#define EDGEINF_AVX512VNNI(fn) (nullptr)
#endif
#if defined(EDGEINF_BUILD_AVX512AMX)
#define EDGEINF_AVX512AMX(fn) (&(fn))
#else
#define EDGEINF_AVX512AMX(fn) (nullptr)
#endif
#if defined(EDGEINF_BUILD_NEON)
#define EDGEINF_NEON(fn) (&(fn))
#else
#define EDGEINF_NEON(fn) (nullptr)
#endif
#if defined(EDGEINF_BUILD_NEONDOT)
#define EDGEINF_NEONDOT(fn) (&(fn))
#else
#define EDGEINF_NEONDOT(fn) (nullptr)
#endif
