"""Cross-build edgeinf for aarch64 and run it on the emulated Raspberry Pi Python.

Host-side helpers shared by ``tools/arm64/cross_build.py``, ``tools/arm64/run_tests.py``
and ``tests/arm64/test_emulated.py``. The emulated Python is the one
``tools/arm64/setup.sh`` builds (aarch64 CPython from Debian's arm64 packages, under
qemu-user, with Pi 3/4/5 board profiles).

The extension is cross-built by ``setup.py`` itself, run by the host Python: the cross
compiler in CC/CXX/LDSHARED (setup.py asks it ``-dumpmachine`` and so builds the NEON and
dot-product files, each with its own flags), the sysroot's Python headers ahead of the
host's, and the target's EXT_SUFFIX (read from the sysroot's sysconfig data) in
SETUPTOOLS_EXT_SUFFIX. Objects and the .so go under ``build/arm64/``, never next to the
x86 build. A copy of the package with the aarch64 .so in it (the "stage") is what the
emulated Python imports.

Emulation checks correctness and ABI only: qemu runs vector code hundreds of times slower
than a board, so no timing taken here means anything about ARM.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_HOME = Path(os.environ.get("EDGEINF_ARM64_HOME") or Path.home() / ".cache" / "edgeinf-arm64")
DEFAULT_BUILD = REPO / "build" / "arm64"
CROSS_CC = "aarch64-linux-gnu-gcc"
CROSS_CXX = "aarch64-linux-gnu-g++"
CROSS_OBJDUMP = "aarch64-linux-gnu-objdump"
CROSS_NM = "aarch64-linux-gnu-nm"

# Board profile -> the kernel path run-time dispatch must pick there.
PROFILES = ("pi3", "pi4", "pi5")
EXPECTED_ISA = {"pi3": "neon", "pi4": "neon", "pi5": "neondot"}
CORE_OF = {"pi3": "Cortex-A53", "pi4": "Cortex-A72", "pi5": "Cortex-A76"}

# What the emulated run leaves out: running benchmarks (timing means nothing under qemu;
# their scripts are staged for the tests of their logic), tests marked slow, and the
# host-side driver of this very run.
PYTEST_ARGS = ("-m", "not slow", "-p", "no:cacheprovider", "-p", "edgeinf_emulation", "-rs")
HOST_ONLY_TESTS = ("tests/arm64/test_emulated.py",)

# The CI subset (docs/arm64.md). On the Pi 5: the suite without the file fuzzers, the tests
# whose code is pure Python and architecture-independent (power, serve, metrics, the file
# readers, the offline quantizer, pipelines, frame sources, the example scripts, the CLI's
# argument handling, the benchmark scripts' logic and the A/B comparison: all run on the host,
# and under qemu they cost minutes while testing nothing ARM-specific; `edgeinf check` and
# `edgeinf demo` still run on the Pi 5 after its tests) and the
# conversion tests of `edgeinf convert` (a development-machine step; ONNX Runtime and NCNN
# themselves still run the real models here). On the Pi 3: what must run on a core without the
# dot product, where an instruction the A53 lacks would fault: dispatch, every kernel path
# against the x86 results (tests/arm64) and the real int8 models on the engine; the Pi 5 runs
# the same NEON paths through every kernel test. On the Pi 4 (the A53's Armv8.0 feature set,
# so the same kernel paths) the dispatch and board checks.
CI_PATHS = {
    "pi5": ("tests",),
    "pi4": ("tests/arm64", "tests/board"),
    "pi3": ("tests/arm64", "tests/board", "tests/kernels/test_dispatch.py", "tests/engine/test_engine_real_models.py"),
}
_HOST_ONLY_ON_PI5 = (
    *(f"tests/{d}" for d in ("power", "serve", "metrics", "formats", "quantize", "pipeline", "sources")),
    *(f"tests/{d}" for d in ("examples", "cli", "bench", "ab")),
    *(f"tests/onnx/{f}.py" for f in ("test_convert", "test_convert_tflite", "test_detections")),
)
# The fuzzers add nothing ARM-specific and take most of the emulated time. The tflite-runtime
# 2.14 checks stay: they run in setup.sh's numpy<2 site (bin/python3-legacy).
CI_PYTEST_ARGS = {
    "pi5": ("-k", "not fuzz", *(f"--ignore={path}" for path in _HOST_ONLY_ON_PI5)),
    "pi4": (),
    "pi3": (),
}
# With --jobs above 1 the Pi 5's suite runs as these shards beside the other profiles (one
# qemu per core): each tuple is one shard's paths, and a last shard takes the rest.
CI_SHARDS = {
    "pi5": (
        ("tests/kernels", "tests/engine"),
        ("tests/runtime",),
    ),
}
# Seconds each CI run took under qemu on 2 cores (Intel Xeon host, with other work beside it;
# only their order matters): the runs start longest first, so the short ones fill in beside
# the long ones and the stage ends sooner.
CI_SECONDS = {"pi5.1": 1014, "pi5.3": 671, "pi3": 640, "pi5.2": 466, "pi4": 133}


class EmulationUnavailable(RuntimeError):
    """The emulated Python, qemu or the cross compiler is missing; the message says what to run."""


@dataclass(frozen=True)
class Emulator:
    """The emulated Pi Python under ``home`` (``$A`` of tools/arm64/setup.sh)."""

    home: Path = DEFAULT_HOME

    @property
    def python(self) -> Path:
        return self.home / "bin" / "python3"

    @property
    def sysroot(self) -> Path:
        return self.home / "root"

    @property
    def site(self) -> Path:
        return self.home / "site"

    def missing(self) -> str | None:
        """Why this emulator cannot be used, or None when it can."""
        if not self.python.exists() or not self.site.is_dir():
            return f"no emulated aarch64 Python at {self.home} (run tools/arm64/setup.sh)"
        for tool in ("qemu-aarch64", CROSS_CC, CROSS_CXX):
            if shutil.which(tool) is None:
                return f"{tool} is not installed (apt-get install qemu-user g++-aarch64-linux-gnu)"
        return None

    def require(self) -> Emulator:
        reason = self.missing()
        if reason:
            raise EmulationUnavailable(reason)
        return self

    def missing_requirements(self, repo: Path = REPO) -> list[str]:
        """Requirements from pyproject.toml (guest_requirements.py) with no distribution in the site."""
        sys.path.insert(0, str(Path(__file__).parent))
        from guest_requirements import guest_requirements

        installed = {_normalize(p.name.split("-")[0]) for p in self.site.glob("*.dist-info")}
        wanted = guest_requirements(repo / "pyproject.toml")
        return [r for r in wanted if _normalize(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) not in installed]

    def python_version(self) -> str:
        """``3.11`` for the bookworm sysroot: the version of its ``usr/bin/python3.X``."""
        names = (re.fullmatch(r"python(3\.\d+)", p.name) for p in (self.sysroot / "usr/bin").glob("python3.*"))
        found = sorted((m.group(1) for m in names if m), key=lambda v: int(v.split(".")[1]))
        if not found:
            raise EmulationUnavailable(f"no python3.X in {self.sysroot}/usr/bin")
        return found[-1]

    def sysconfig_vars(self) -> dict:
        """The target interpreter's build-time sysconfig variables, read from the sysroot's file."""
        version = self.python_version()
        candidates = sorted((self.sysroot / f"usr/lib/python{version}").glob("_sysconfigdata_*aarch64*.py"))
        if not candidates:
            raise EmulationUnavailable(f"no aarch64 sysconfig data under {self.sysroot}/usr/lib/python{version}")
        tree = ast.parse(candidates[0].read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "build_time_vars":
                return ast.literal_eval(node.value)
        raise EmulationUnavailable(f"{candidates[0]} has no build_time_vars")

    def ext_suffix(self) -> str:
        return self.sysconfig_vars()["EXT_SUFFIX"]  # .cpython-311-aarch64-linux-gnu.so

    def include_dirs(self) -> list[Path]:
        # usr/include/python3.X/pyconfig.h is Debian's multiarch switch that includes
        # <aarch64-linux-gnu/python3.X/pyconfig.h>, hence usr/include as well.
        return [self.sysroot / f"usr/include/python{self.python_version()}", self.sysroot / "usr/include"]

    def env(self, profile: str, pythonpath: Sequence[Path] = (), extra: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for the emulated Python on one board profile."""
        if profile not in PROFILES:
            raise ValueError(f"unknown board profile {profile!r}: expected one of {', '.join(PROFILES)}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QEMU_", "PYTHON", "EDGEINF_ISA"))}
        env.pop("LD_PRELOAD", None)
        env.pop("VIRTUAL_ENV", None)
        env["PI"] = profile
        legacy = self.home / "bin" / "python3-legacy"  # tflite-runtime 2.14 with numpy<2 (setup.sh 5b)
        if legacy.exists():
            env["EDGEINF_LEGACY_PYTHON"] = str(legacy)
        else:
            env.pop("EDGEINF_LEGACY_PYTHON", None)  # the host's x86 .venv-legacy is no ARM runtime
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*pythonpath, self.site])
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # the stage is shared by the three profiles
        env.update(extra or {})
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        profile: str,
        cwd: Path,
        pythonpath: Sequence[Path] = (),
        extra_env: dict[str, str] | None = None,
        timeout: float | None = None,
        capture: bool = True,
    ) -> subprocess.CompletedProcess:
        """Run ``python3 ARGS`` on the emulated board."""
        return subprocess.run(
            [str(self.python), *args],
            cwd=cwd,
            env=self.env(profile, pythonpath, extra_env),
            capture_output=capture,
            text=True,
            timeout=timeout,
        )


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the runner and pytest may build at the same time
        yield


def _sources_digest(repo: Path, emulator: Emulator) -> str:
    """Digest of everything the .so depends on: setup.py, csrc/, compiler and target headers."""
    digest = hashlib.sha256()
    files = [repo / "setup.py", *sorted(p for p in (repo / "csrc").rglob("*") if p.is_file())]
    for path in files:
        digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes())
    compiler = subprocess.run([CROSS_CXX, "--version"], capture_output=True, text=True).stdout
    digest.update(compiler.encode() + emulator.ext_suffix().encode())
    return digest.hexdigest()


def cross_build(
    emulator: Emulator, repo: Path = REPO, out: Path = DEFAULT_BUILD, *, log: bool = False
) -> tuple[Path, Path]:
    """Build the aarch64 ``edgeinf._C`` with setup.py and the cross compiler.

    Rebuilds from scratch whenever setup.py, a file under csrc/ or the compiler changed
    (distutils alone would miss an edited header).

    Returns:
        (path of the .so, folder of the object files)
    """
    emulator.require()
    lib, objects = out / "lib", out / "obj"
    with _locked(out):
        stamp = out / "sources.sha256"
        wanted = _sources_digest(repo, emulator)
        suffix = emulator.ext_suffix()
        so = lib / "edgeinf" / f"_C{suffix}"
        if not (so.exists() and stamp.exists() and stamp.read_text() == wanted):
            _build(emulator, repo, lib, objects, log)
            stamp.write_text(wanted)
    if not so.exists():
        raise RuntimeError(f"cross-build produced no {so}")
    missing = undefined_own_symbols(so)
    if missing:
        # Python extensions link with undefined symbols allowed (libpython's), so a variant
        # referenced but never compiled (e.g. a family's kernels__neon() without its neon.cc)
        # would only fail at import on the board. Say so here, by name.
        raise RuntimeError(
            f"{so.name} refers to edgeinf functions no compiled file defines: {', '.join(missing)}. "
            "A kernel family dispatches to an ISA variant whose source file does not exist for this target."
        )
    return so, objects


def _build(emulator: Emulator, repo: Path, lib: Path, objects: Path, log: bool) -> None:
    shutil.rmtree(lib, ignore_errors=True)
    shutil.rmtree(objects, ignore_errors=True)
    env = dict(os.environ)
    env.update(
        CC=CROSS_CC,
        CXX=CROSS_CXX,
        LDSHARED=f"{CROSS_CXX} -shared",  # not the host's "gcc -shared -L<host libdir> -rpath ..."
        SETUPTOOLS_EXT_SUFFIX=emulator.ext_suffix(),
    )
    include = os.pathsep.join(str(p) for p in emulator.include_dirs())
    cmd = [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp", str(objects)]
    cmd += ["--include-dirs", include]
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=not log, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cross-build failed ({' '.join(cmd)}):\n{(proc.stderr or '')[-4000:]}")


def undefined_own_symbols(so: Path) -> list[str]:
    """Demangled names of edgeinf:: functions the .so uses but does not define."""
    nm = subprocess.run(
        [CROSS_NM, "-D", "-C", "--undefined-only", str(so)], capture_output=True, text=True, check=True
    ).stdout
    return sorted({line.split(None, 1)[1] for line in nm.splitlines() if "edgeinf::" in line})


def stage(so: Path, dest: Path, repo: Path = REPO) -> Path:
    """A copy of the package and its tests with the aarch64 .so in place of the x86 one."""
    ignore = shutil.ignore_patterns("*.so", "__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", "build")
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    # tests use tools/ helpers, and load functions of benchmarks/ scripts (never run here)
    for name in ("edgeinf", "tests", "examples", "tools", "models", "benchmarks"):
        if (repo / name).is_dir():
            shutil.copytree(repo / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(repo / name, dest / name)
    shutil.copy2(so, dest / "edgeinf" / so.name)
    shutil.copy2(Path(__file__).with_name("edgeinf_emulation.py"), dest / "edgeinf_emulation.py")
    return dest


def objdump(obj: Path) -> str:
    return subprocess.run(
        [CROSS_OBJDUMP, "-d", "--no-show-raw-insn", str(obj)], capture_output=True, text=True, check=True
    ).stdout


# Instructions a Cortex-A53/A72 (Armv8.0-A) lacks and a compiler may emit when given a newer
# -march: dot products, int8 matrix multiply, Armv8.1 LSE atomics, half-precision vector
# arithmetic, SVE. None may appear outside the neondot objects. (The linked .so does contain
# LSE atomics: libgcc's outline-atomics helpers, which check HWCAP before using them; that
# is why the objects are checked, not the .so.)
_DOT_AND_MATMUL = {"sdot", "udot", "usdot", "sudot", "bfdot", "smmla", "ummla", "usmmla", "bfmmla"}
_LSE_PREFIXES = ("ldadd", "ldclr", "ldeor", "ldset", "ldsmax", "ldsmin", "ldumax", "ldumin", "swp", "cas")
_LSE_PREFIXES += ("stadd", "stclr", "steor", "stset", "stsmax", "stsmin", "stumax", "stumin")
_SVE_OPERAND = re.compile(r"\b[zp]\d+\.[bhsdq]\b|\bp\d+/[zm]\b")
_HALF_VECTOR = re.compile(r"\bv\d+\.[48]h\b")
_HALF_CONVERSIONS = {"fcvtl", "fcvtl2", "fcvtn", "fcvtn2"}


def instructions_beyond_armv8_0(disassembly: str) -> list[str]:
    """Lines of an ``objdump -d --no-show-raw-insn`` listing an A53/A72 would fault on."""
    found = []
    for line in disassembly.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip().endswith(":") or not parts[1].strip():
            continue
        mnemonic = parts[1].split()[0]
        operands = parts[2] if len(parts) > 2 else ""
        if (
            mnemonic in _DOT_AND_MATMUL
            or mnemonic.startswith(_LSE_PREFIXES)
            or _SVE_OPERAND.search(operands)
            or (mnemonic.startswith("f") and mnemonic not in _HALF_CONVERSIONS and _HALF_VECTOR.search(operands))
        ):
            found.append(line.strip())
    return found


def host_digests(repo: Path = REPO) -> dict:
    """Kernel result digests computed by the host Python on the host's own (x86) build."""
    proc = subprocess.run(
        [sys.executable, str(repo / "tests/arm64/kernel_digests.py")],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"host kernel digests failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout)


def cli_commands(stage_dir: Path) -> list[str]:
    """The `edgeinf` subcommands the staged package registers (read from its sources, no import)."""
    found = set()
    for source in (stage_dir / "edgeinf").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        found.update(re.findall(r"add_parser\(\s*\"([a-z-]+)\"", text))
    return sorted(found)
