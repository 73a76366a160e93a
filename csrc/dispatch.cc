#include "dispatch.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cstdint>
#include <fstream>
#endif

namespace edgeinf {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Whether this process may use the AMX tile registers: the OS saves their state (XCR0 bits
// 17 and 18) and, on Linux, grants the process the large state once it asks
// (ARCH_REQ_XCOMP_PERM; without it the first tile instruction raises SIGILL).
bool amx_granted(unsigned xcr0_lo) {
  constexpr unsigned kTileState = (1u << 17) | (1u << 18);
  if ((xcr0_lo & kTileState) != kTileState) return false;
#if defined(__x86_64__) && defined(__linux__)
  constexpr int kReqXcompPerm = 0x1023, kXfeatureTileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureTileData) == 0;
#else
  return false;
#endif
}

// The VNNI features, read from CPUID directly (older compilers' __builtin_cpu_supports
// know neither name). A feature is usable only when the OS saves the registers it uses
// (XCR0 through XGETBV): ymm for AVX-VNNI, zmm and the mask registers for AVX-512.
void detect_vnni(CpuInfo& info) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & bit_OSXSAVE) == 0) return;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  constexpr unsigned kYmmState = 0x6;   // SSE and AVX state
  constexpr unsigned kZmmState = 0xE6;  // ... and opmask, ZMM0-15 upper halves, ZMM16-31
  if (__get_cpuid_max(0, nullptr) < 7) return;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx512 = (ebx & bit_AVX512F) != 0 && (ebx & bit_AVX512BW) != 0;
  info.avx512_vnni = avx512 && (ecx & (1u << 11)) != 0 && (xcr0_lo & kZmmState) == kZmmState;
  const unsigned subleaves = eax;
  constexpr unsigned kAmxTile = 1u << 24, kAmxInt8 = 1u << 25;
  const bool amx = (edx & kAmxTile) != 0 && (edx & kAmxInt8) != 0;
  if (subleaves >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    info.avx_vnni = (eax & (1u << 4)) != 0 && (xcr0_lo & kYmmState) == kYmmState;
  }
  info.amx_int8 = info.avx512_vnni && amx && amx_granted(xcr0_lo);
}
#endif

#if defined(__aarch64__) && defined(__linux__)
// Arm Ltd's cores (MIDR_EL1 implementer 0x41) by part number, and whether each issues out
// of order; other implementers' cores (NVIDIA's Carmel, ...) stay unknown.
struct ArmPart {
  unsigned part;
  const char* name;
  bool out_of_order;
};
constexpr ArmPart kArmParts[] = {
    {0xd03, "cortex-a53", false}, {0xd04, "cortex-a35", false}, {0xd05, "cortex-a55", false},
    {0xd07, "cortex-a57", true},  {0xd08, "cortex-a72", true},  {0xd09, "cortex-a73", true},
    {0xd0a, "cortex-a75", true},  {0xd0b, "cortex-a76", true},  {0xd0c, "neoverse-n1", true},
    {0xd0d, "cortex-a77", true},  {0xd41, "cortex-a78", true},  {0xd46, "cortex-a510", false},
    {0xd47, "cortex-a710", true}, {0xd4b, "cortex-a78c", true},
};

// MIDR_EL1, 0 where neither way can read it.
uint64_t read_midr(unsigned long hwcap) {
  if ((hwcap & HWCAP_CPUID) != 0) {
    uint64_t midr = 0;
    __asm__("mrs %0, midr_el1" : "=r"(midr));
    return midr;
  }
  std::ifstream file("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1");
  uint64_t midr = 0;
  file >> std::hex >> midr;
  return file ? midr : 0;
}

void detect_arm_core(CpuInfo& info, uint64_t midr) {
  const unsigned implementer = (midr >> 24) & 0xff, part = (midr >> 4) & 0xfff;
  if (implementer != 0x41) return;
  for (const ArmPart& known : kArmParts) {
    if (known.part == part) {
      info.arm_core = known.name;
      info.arm_out_of_order = known.out_of_order;
      return;
    }
  }
}
#endif

CpuInfo detect_cpu() {
  CpuInfo info;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the OS's XSAVE state (XGETBV), so "supported" means usable.
  __builtin_cpu_init();
  info.avx2 = __builtin_cpu_supports("avx2");
  info.fma = __builtin_cpu_supports("fma");
  info.f16c = false;
#if defined(__GNUC__) && __GNUC__ >= 11
  info.f16c = __builtin_cpu_supports("f16c");
#endif
  detect_vnni(info);
#elif defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP);
  info.neon = (hwcap & HWCAP_ASIMD) != 0;
  info.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
#ifdef HWCAP2_I8MM
  info.i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
  detect_arm_core(info, read_midr(hwcap));
#endif
  return info;
}

std::atomic<int> g_active{-1};

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect_cpu();
  return info;
}

bool isa_built(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
#if defined(EDGEINF_BUILD_AVX2)
      return true;
#else
      return false;
#endif
    case Isa::kAvx2Vnni:
#if defined(EDGEINF_BUILD_AVX2VNNI)
      return true;
#else
      return false;
#endif
    case Isa::kAvx512Vnni:
#if defined(EDGEINF_BUILD_AVX512VNNI)
      return true;
#else
      return false;
#endif
    case Isa::kAvx2EmulatedVnni:
      return isa_built(Isa::kAvx2);
    case Isa::kAvx512Amx:
#if defined(EDGEINF_BUILD_AVX512AMX)
      return true;
#else
      return false;
#endif
    case Isa::kNeon:
#if defined(EDGEINF_BUILD_NEON)
      return true;
#else
      return false;
#endif
    case Isa::kNeonDot:
#if defined(EDGEINF_BUILD_NEONDOT)
      return true;
#else
      return false;
#endif
  }
  return false;
}

bool isa_supported(Isa isa) {
  if (!isa_built(isa)) return false;
  const CpuInfo& cpu = cpu_info();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
    case Isa::kAvx2EmulatedVnni:
      return cpu.avx2 && cpu.fma;
    case Isa::kAvx2Vnni:
      return cpu.avx2 && cpu.fma && cpu.avx_vnni;
    case Isa::kAvx512Vnni:
      return cpu.avx2 && cpu.fma && cpu.avx512_vnni;
    case Isa::kAvx512Amx:
      return cpu.avx2 && cpu.fma && cpu.avx512_vnni && cpu.amx_int8;
    case Isa::kNeon:
      return cpu.neon;
    case Isa::kNeonDot:
      return cpu.neon && cpu.dotprod;
  }
  return false;
}

Isa best_isa() {
  for (Isa isa : {Isa::kNeonDot, Isa::kNeon, Isa::kAvx512Amx, Isa::kAvx512Vnni, Isa::kAvx2Vnni, Isa::kAvx2}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kScalar;
}

namespace {

// The path before any set_active_isa(): EDGEINF_ISA's when it names a usable one, else the
// best. A bad value is reported by apply_isa_environment(), which the native module calls
// when it loads; here it falls back to the best path.
Isa initial_isa() {
  const char* forced = std::getenv("EDGEINF_ISA");
  if (forced != nullptr && *forced != '\0') {
    for (int i = 0; i <= static_cast<int>(Isa::kAvx512Amx); ++i) {
      const Isa isa = static_cast<Isa>(i);
      if (std::string(forced) == isa_name(isa) && isa_supported(isa)) return isa;
    }
  }
  return best_isa();
}

}  // namespace

Isa active_isa() {
  int current = g_active.load(std::memory_order_relaxed);
  if (current < 0) {
    // Two first callers may race here: both store the same value.
    current = static_cast<int>(initial_isa());
    g_active.store(current, std::memory_order_relaxed);
  }
  return static_cast<Isa>(current);
}

void set_active_isa(Isa isa) {
  if (!isa_supported(isa)) {
    throw std::invalid_argument(std::string("kernel path '") + isa_name(isa) +
                                "' is not usable here (best available: '" + isa_name(best_isa()) + "')");
  }
  g_active.store(static_cast<int>(isa), std::memory_order_relaxed);
}

// Indexed by Isa's value; the order of the enum.
constexpr const char* kIsaNames[] = {
    "scalar", "avx2", "neon", "neondot", "avx2vnni", "avx512vnni", "avx2-emulated-vnni", "avx512amx"};
constexpr int kIsaCount = static_cast<int>(sizeof(kIsaNames) / sizeof(kIsaNames[0]));
static_assert(kIsaCount == static_cast<int>(Isa::kAvx512Amx) + 1, "a name for every kernel path");

const char* isa_name(Isa isa) {
  const int index = static_cast<int>(isa);
  return index >= 0 && index < kIsaCount ? kIsaNames[index] : "unknown";
}

Isa parse_isa(const std::string& name) {
  for (int i = 0; i < kIsaCount; ++i) {
    if (name == kIsaNames[i]) return static_cast<Isa>(i);
  }
  std::string names;
  for (Isa isa : kPublicIsas) names += std::string(names.empty() ? "" : ", ") + isa_name(isa);
  throw std::invalid_argument("unknown kernel path '" + name + "': expected one of " + names);
}

void apply_isa_environment() {
  const char* forced = std::getenv("EDGEINF_ISA");
  if (forced == nullptr || *forced == '\0') return;
  try {
    set_active_isa(parse_isa(forced));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("EDGEINF_ISA='") + forced + "': " + e.what());
  }
}

}  // namespace edgeinf
