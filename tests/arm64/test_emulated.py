"""From the x86_64 host: cross-build edgeinf for aarch64 and check it on emulated Pi 3, 4 and 5.

Needs the emulated Python of tools/arm64/setup.sh (``~/.cache/edgeinf-arm64``, or
``EDGEINF_ARM64_HOME``), qemu-user and the aarch64 cross compiler; without them the module
skips and says what to run. The whole suite per profile is ``slow``; the rest takes about
a minute after the first cross-build.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import signal
import sys
from pathlib import Path

import pytest

if platform.machine() != "x86_64":
    pytest.skip(f"drives qemu from an x86_64 host; this is {platform.machine()}", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("edgeinf_arm64_emulated", REPO / "tools/arm64/emulated.py")
emulated = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = emulated  # dataclasses look their module up by name
_spec.loader.exec_module(emulated)

EMULATOR = emulated.Emulator()
if EMULATOR.missing():
    pytest.skip(EMULATOR.missing(), allow_module_level=True)
pytest.importorskip("pybind11", reason="the cross build of edgeinf._C needs pybind11 (pip install pybind11)")

SIGILL_PROBE = r"""
#include <arm_neon.h>
#include <stdio.h>
int main(void) {
  int32x4_t acc = vdotq_s32(vdupq_n_s32(1), vdupq_n_s8(3), vdupq_n_s8(-2));  /* 1 + 4 * (3 * -2) */
  printf("%d\n", vgetq_lane_s32(acc, 0));
  return 0;
}
"""


@pytest.fixture(scope="module")
def arm_build():
    return emulated.cross_build(EMULATOR)


@pytest.fixture(scope="module")
def arm_stage(arm_build, tmp_path_factory):
    so, _ = arm_build
    return emulated.stage(so, tmp_path_factory.mktemp("arm64") / "stage")


@pytest.fixture(scope="module")
def x86_digests(tmp_path_factory):
    path = tmp_path_factory.mktemp("digests") / "x86.json"
    path.write_text(json.dumps(emulated.host_digests()))
    return path


def guest(stage: Path, profile: str, args: list[str], timeout: float = 300, **env):
    """The emulated Python on ``profile`` run with ``args`` in ``stage`` (edgeinf staged there)."""
    return EMULATOR.run(args, profile=profile, cwd=stage, pythonpath=[stage], extra_env=env, timeout=timeout)


def guest_json(stage: Path, profile: str, code: str, **env) -> dict:
    proc = guest(stage, profile, ["-c", code], **env)
    assert proc.returncode == 0, f"{profile}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", f"{path} is not an ELF file"
    return int.from_bytes(header[18:20], "little")


def test_setup_py_cross_builds_an_aarch64_extension_beside_the_x86_one(arm_build):
    so, objects = arm_build
    assert so.name == f"_C{EMULATOR.ext_suffix()}" and so.name.endswith("aarch64-linux-gnu.so")
    assert elf_machine(so) == 183  # EM_AARCH64
    assert REPO / "build" in so.parents, "the aarch64 build must stay out of the source tree"
    for native in (REPO / "edgeinf").glob("_C.*.so"):
        assert elf_machine(native) == 62, f"{native} (x86-64) was overwritten"  # EM_X86_64
    compiled = {o.relative_to(objects).with_suffix(".cc").as_posix() for o in objects.rglob("*.o")}
    wanted = {s.relative_to(REPO).as_posix() for s in (REPO / "csrc").rglob("*.cc") if "tests" not in s.parts}
    # setup.py's x86 paths: a file's stem, or its "__" suffix
    x86_only = ("avx2", "avx2vnni", "avx512vnni", "avx512amx")
    wanted = {s for s in wanted if not Path(s).stem.endswith(x86_only)}
    assert compiled == wanted, f"missing: {sorted(wanted - compiled)}, unexpected: {sorted(compiled - wanted)}"


def test_only_neondot_objects_hold_instructions_an_a53_or_a72_lacks(arm_build):
    _, objects = arm_build
    offenders, dot_objects = {}, {}
    for obj in sorted(objects.rglob("*.o")):
        found = emulated.instructions_beyond_armv8_0(emulated.objdump(obj))
        if obj.stem == "neondot" or obj.stem.endswith("__neondot"):
            dot_objects[str(obj.relative_to(objects))] = [line for line in found if "dot\t" in line]
        elif found:
            offenders[str(obj.relative_to(objects))] = found[:3]
    assert not offenders, f"Armv8.2+ instructions outside neondot files: {offenders}"
    # and the neondot files were compiled with their flag: they do use the dot product
    assert all(dot_objects.values()), f"neondot objects without SDOT/UDOT: {dot_objects}"


def test_the_instruction_check_sees_a_dot_product(tmp_path):
    source = tmp_path / "probe.c"
    source.write_text(SIGILL_PROBE)
    obj = tmp_path / "probe.o"
    emulated.subprocess.run(
        [emulated.CROSS_CC, "-O1", "-march=armv8.2-a+dotprod", "-c", str(source), "-o", str(obj)], check=True
    )
    found = emulated.instructions_beyond_armv8_0(emulated.objdump(obj))
    assert len(found) == 1 and "\tsdot\t" in found[0], found


@pytest.fixture(scope="module")
def sigill_probe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("probe")
    (folder / "probe.c").write_text(SIGILL_PROBE)
    cmd = [emulated.CROSS_CC, "-O1", "-march=armv8.2-a+dotprod", "-static", "probe.c", "-o", "probe"]
    emulated.subprocess.run(cmd, cwd=folder, check=True)
    return folder / "probe"


@pytest.mark.parametrize("profile", emulated.PROFILES)
def test_profiles_fault_on_dot_product_like_the_boards_do(profile, sigill_probe, tmp_path):
    """A53/A72 raise SIGILL on SDOT, the A76 runs it: so a misplaced SDOT fails the ARM tests."""
    code = (
        "import json, subprocess, sys; "
        f"p = subprocess.run([{str(sigill_probe)!r}], capture_output=True, text=True); "
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout.strip()}))"
    )
    result = guest_json(tmp_path, profile, code)
    if profile == "pi5":
        assert result == {"rc": 0, "out": "-23"}
    else:
        assert result["rc"] == -signal.SIGILL, result


PROBE_DISPATCH = (
    "import json; from edgeinf import board, isa; b = board.detect(); "
    "print(json.dumps({'active': isa.active_isa(), 'supported': isa.supported_isas(), "
    "'built': isa.built_isas(), 'board': b.key, 'cores': list(b.cores), 'dotprod': b.dotprod, "
    "'emulated': b.emulated}))"
)


@pytest.mark.parametrize("profile", emulated.PROFILES)
def test_dispatch_picks_neon_on_pi3_pi4_and_neondot_on_pi5(profile, arm_stage):
    got = guest_json(arm_stage, profile, PROBE_DISPATCH)
    assert got["built"] == ["scalar", "neon", "neondot"]
    assert got["active"] == emulated.EXPECTED_ISA[profile], got
    assert got["supported"][-1] == emulated.EXPECTED_ISA[profile], got
    assert (got["board"], got["cores"], got["dotprod"]) == (profile, [emulated.CORE_OF[profile]], profile == "pi5")
    assert got["emulated"] is True


def test_forcing_neondot_on_a_pi3_is_a_clear_error_not_a_crash(arm_stage):
    proc = guest(arm_stage, "pi3", ["-c", "import edgeinf.isa"], EDGEINF_ISA="neondot")
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-1500:])
    assert "EDGEINF_ISA='neondot': kernel path 'neondot' is not usable here (best available: 'neon')" in proc.stderr


@pytest.mark.parametrize("profile", emulated.PROFILES)
def test_arm_checks_pass_on_each_profile(profile, arm_stage, x86_digests):
    """tests/arm64 and tests/board in the emulated Python, x86 digests given for comparison."""
    pytest_args = ["-m", "pytest", *emulated.PYTEST_ARGS, "tests/arm64", "tests/board"]
    proc = guest(arm_stage, profile, pytest_args, timeout=900, EDGEINF_X86_DIGESTS=str(x86_digests))
    assert proc.returncode == 0, f"{profile}: pytest exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-1500:]}"
    assert "passed" in proc.stdout.splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("profile", emulated.PROFILES)
def test_whole_suite_passes_on_each_profile(profile, arm_stage, x86_digests):
    pytest_args = ["-m", "pytest", *emulated.PYTEST_ARGS, "tests"]
    proc = guest(arm_stage, profile, pytest_args, timeout=3600, EDGEINF_X86_DIGESTS=str(x86_digests))
    assert proc.returncode == 0, f"{profile}: pytest exit {proc.returncode}\n{proc.stdout[-4000:]}{proc.stderr[-1500:]}"
