"""The benchmarks' native probes, built on first use and kept out of the shipped package.

Two measurements need native code that no user of edgeinf needs: the row-read probe
(bench_preprocess.py: load the rows a pass reads, no arithmetic, no writes) and the
CPU's int8 multiply-add peak (bench_int8.py). Their sources are benchmarks/probes/*.cc;
``load()`` compiles them into a module ``_bench_probes`` under the edgeinf cache
(``$EDGEINF_CACHE/bench_probes/<hash of sources and Python>``) with the compiler Python
was built with, each ISA file with only its own flags as setup.py does, and imports it.
A later call, or a later run, reuses the built module.

    probes = load()
    probes.int8_peak_probe(10)  # operations done; None where the CPU has no AVX2
    probes.int8_vnni_peak_probe(10)  # the same with VPDPBUSD zmm; None without AVX-512 VNNI
    probes.int8_amx_peak_probe(10)  # TDPBUSD tiles: only where edgeinf's avx512amx path runs
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

from edgeinf.config import cache_dir

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "probes"
CSRC = HERE.parent / "csrc"  # the bindings' array checks (csrc/bindings/quant_arrays.h)
FLAGS = ["-O3", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-Wall"]
ISA_FLAGS = {
    "avx2": ["-mavx2", "-mfma"],
    "avx512vnni": ["-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vnni"],
    "avx512amx": ["-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vnni", "-mamx-tile", "-mamx-int8"],
}


def _isa(src: Path) -> str | None:
    return next((isa for isa in ISA_FLAGS if src.stem.endswith("__" + isa)), None)


_module: ModuleType | None = None


def _sources() -> list[Path]:
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return [p for p in sorted(SOURCES.glob("*.cc")) if x86 or _isa(p) is None]


def _fingerprint(sources: list[Path], compiler: list[str]) -> str:
    h = hashlib.sha256()
    for p in [*sources, *sorted(SOURCES.glob("*.h")), CSRC / "bindings" / "quant_arrays.h"]:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    h.update(" ".join([*compiler, *FLAGS, sys.version]).encode())
    return h.hexdigest()[:16]


def build(target_dir: Path) -> Path:
    """Compiles the probes into ``target_dir`` and returns the module's path."""
    import pybind11

    compiler = shlex.split(os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++")
    sources = _sources()
    includes = [f"-I{d}" for d in (SOURCES, CSRC, pybind11.get_include(), sysconfig.get_paths()["include"])]
    defines = [f"-DEDGEINF_BUILD_{isa.upper()}=1" for isa in ISA_FLAGS if any(_isa(p) == isa for p in sources)]
    target = target_dir / f"_bench_probes{sysconfig.get_config_var('EXT_SUFFIX')}"
    with tempfile.TemporaryDirectory() as tmp:
        objects = []
        for src in sources:
            obj = Path(tmp) / f"{src.stem}.o"
            isa = ISA_FLAGS.get(_isa(src) or "", [])
            subprocess.run([*compiler, *FLAGS, *isa, *defines, *includes, "-c", str(src), "-o", str(obj)], check=True)
            objects.append(str(obj))
        partial = target.with_suffix(".partial")
        subprocess.run([*compiler, "-shared", *objects, "-o", str(partial)], check=True)
        partial.replace(target)  # a reader never sees a half-written module
    return target


def load() -> ModuleType:
    """The probes module, built first when this checkout's sources have not been built yet."""
    global _module
    if _module is not None:
        return _module
    compiler = shlex.split(os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++")
    target_dir = cache_dir() / "bench_probes" / _fingerprint(_sources(), compiler)
    target = target_dir / f"_bench_probes{sysconfig.get_config_var('EXT_SUFFIX')}"
    if not target.exists():
        target_dir.mkdir(parents=True, exist_ok=True)
        build(target_dir)
    spec = importlib.util.spec_from_file_location("_bench_probes", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _module = module
    return module
