#include "dispatch.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace edgeinf {
namespace {

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
#elif defined(__aarch64__) && defined(__linux__)
  const unsigned long hwcap = getauxval(AT_HWCAP);
  info.neon = (hwcap & HWCAP_ASIMD) != 0;
  info.dotprod = (hwcap & HWCAP_ASIMDDP) != 0;
#ifdef HWCAP2_I8MM
  info.i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#endif
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
      return cpu.avx2 && cpu.fma;
    case Isa::kNeon:
      return cpu.neon;
    case Isa::kNeonDot:
      return cpu.neon && cpu.dotprod;
  }
  return false;
}

Isa best_isa() {
  for (Isa isa : {Isa::kNeonDot, Isa::kNeon, Isa::kAvx2}) {
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
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kNeonDot}) {
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

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kNeon:
      return "neon";
    case Isa::kNeonDot:
      return "neondot";
  }
  return "unknown";
}

Isa parse_isa(const std::string& name) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kNeon, Isa::kNeonDot}) {
    if (name == isa_name(isa)) return isa;
  }
  throw std::invalid_argument("unknown kernel path '" + name + "': expected one of scalar, avx2, neon, neondot");
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
