"""Builds edgeinf._C from csrc/, compiling each ISA file with only its own flags.

A source whose file stem is `avx2` (or ends in `__avx2`) is built only for x86-64, with
-mavx2 -mfma; `avx2vnni`, `avx512vnni` and `avx512amx` likewise with AVX-VNNI, AVX-512 VNNI
or AVX-512 VNNI and AMX-INT8 added
(skipped, with the paths they serve, by a compiler that lacks the flags); `neon` only for aarch64 (NEON is baseline there); `neondot` only for
aarch64, with the dot-product extension. Everything else is portable C++ and is built
with baseline flags, so the package never executes an instruction the CPU lacks: the
run-time dispatch in csrc/dispatch.cc decides which built path may run.
The target is asked of the compiler itself (-dumpmachine), so a cross compiler set in
CXX/CC builds the aarch64 variant from an x86-64 host.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = Path(__file__).parent
ISA_FLAGS = {
    "avx2": ("x86_64", ["-mavx2", "-mfma", "-mf16c"]),
    "avx2vnni": ("x86_64", ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"]),
    "avx512vnni": ("x86_64", ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vnni"]),
    "avx512amx": (
        "x86_64",
        ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vnni", "-mamx-tile", "-mamx-int8"],
    ),
    "neon": ("aarch64", []),
    "neondot": ("aarch64", ["-march=armv8.2-a+dotprod"]),
}
COMMON_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-Wall", "-Wno-unused-function"]


def isa_of(source: str) -> str | None:
    stem = Path(source).stem
    for isa in ISA_FLAGS:
        if stem == isa or stem.endswith("__" + isa):
            return isa
    return None


def target_arch(compiler_cmd: list[str]) -> str:
    triple = subprocess.run([*compiler_cmd[:1], "-dumpmachine"], capture_output=True, text=True, check=True).stdout
    return triple.strip().split("-")[0]


def accepts_flags(compiler_cmd: list[str], flags: list[str]) -> bool:
    """Whether the compiler takes `flags` (an older one may lack -mavxvnni, say)."""
    probe = [*compiler_cmd[:1], *flags, "-x", "c++", "-fsyntax-only", "-"]
    return subprocess.run(probe, input="", capture_output=True, text=True).returncode == 0


class BuildExt(build_ext):
    def build_extensions(self):
        arch = target_arch(self.compiler.compiler_so)
        built = [
            isa
            for isa, (isa_arch, flags) in ISA_FLAGS.items()
            if isa_arch == arch and accepts_flags(self.compiler.compiler_so, flags)
        ]
        for ext in self.extensions:
            ext.sources = [s for s in ext.sources if isa_of(s) in (None, *built)]
            ext.define_macros += [(f"EDGEINF_BUILD_{isa.upper()}", "1") for isa in built]

        compile_one = self.compiler._compile

        def compile_with_isa_flags(obj, src, ext, cc_args, extra_postargs, pp_opts):
            isa = isa_of(src)
            extra = list(extra_postargs) + (ISA_FLAGS[isa][1] if isa else [])
            return compile_one(obj, src, ext, cc_args, extra, pp_opts)

        self.compiler._compile = compile_with_isa_flags
        super().build_extensions()


# The sources of the one extension compile in parallel (EDGEINF_JOBS, default: every core).
ParallelCompile("EDGEINF_JOBS", default=os.cpu_count() or 1).install()


sources = sorted(str(p.relative_to(HERE)) for p in (HERE / "csrc").rglob("*.cc") if "tests" not in p.parts)

setup(
    ext_modules=[
        Pybind11Extension(
            "edgeinf._C",
            sources,
            include_dirs=["csrc"],
            cxx_std=17,
            extra_compile_args=COMMON_FLAGS,
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
