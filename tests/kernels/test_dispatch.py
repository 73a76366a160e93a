"""Run-time dispatch: the best usable path by default, forcing by EDGEINF_ISA or use_isa."""

import os
import platform
import subprocess
import sys

import pytest

from edgeinf import _C
from edgeinf.isa import active_isa, built_isas, cpu_features, emulated_isas, set_isa, supported_isas, use_isa

X86_PATHS = {"avx2vnni": "avx_vnni", "avx512vnni": "avx512_vnni", "avx512amx": "amx_int8"}  # path: its cpu_features key


def test_best_path_is_active_and_supported():
    supported = supported_isas()
    assert supported[0] == "scalar"
    assert active_isa() == supported[-1] or "EDGEINF_ISA" in os.environ
    assert set(supported) <= set(built_isas())


def test_built_paths_follow_the_architecture():
    built = set(built_isas())
    if platform.machine() == "x86_64":
        assert {"scalar", "avx2"} <= built <= {"scalar", "avx2", *X86_PATHS}
        has_avx2 = cpu_features()["avx2"] and cpu_features()["fma"]
        assert ("avx2" in supported_isas()) == has_avx2
        for path, feature in X86_PATHS.items():
            assert (path in supported_isas()) == (path in built and has_avx2 and cpu_features()[feature]), path
    elif platform.machine() == "aarch64":
        assert built == {"scalar", "neon", "neondot"}
        assert ("neondot" in supported_isas()) == cpu_features()["dotprod"]


def test_use_isa_switches_and_restores():
    before = active_isa()
    with use_isa("scalar"):
        assert active_isa() == "scalar"
    assert active_isa() == before


@pytest.mark.parametrize("name", ["sse9", ""])
def test_unknown_path_is_a_value_error(name):
    with pytest.raises(ValueError, match="unknown kernel path"):
        set_isa(name)


def test_unusable_path_is_a_value_error():
    missing = [isa for isa in ("avx2", "neon", "neondot") if isa not in supported_isas()]
    with pytest.raises(ValueError, match="not usable here"):
        set_isa(missing[0])


def run_with_env(value):
    env = dict(os.environ, EDGEINF_ISA=value)
    code = "import edgeinf.isa as k; print(k.active_isa())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_environment_forces_a_path():
    proc = run_with_env("scalar")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "scalar"


def test_environment_with_a_bad_path_fails_clearly():
    proc = run_with_env("avx512")
    assert proc.returncode != 0
    assert "EDGEINF_ISA='avx512'" in proc.stderr and "unknown kernel path" in proc.stderr


@pytest.mark.parametrize("module", ["edgeinf.quant", "edgeinf.postprocess", "edgeinf.preprocess"])
def test_environment_applies_however_edgeinf_is_imported(module):
    env = dict(os.environ, EDGEINF_ISA="scalar")
    code = f"import {module}, edgeinf._C as c; print(c.active_isa())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "scalar"


def test_environment_with_a_bad_path_fails_on_any_import():
    env = dict(os.environ, EDGEINF_ISA="avx512")
    proc = subprocess.run([sys.executable, "-c", "import edgeinf.quant"], capture_output=True, text=True, env=env)
    assert proc.returncode != 0
    assert "EDGEINF_ISA='avx512': unknown kernel path 'avx512'" in proc.stderr


def test_edgeinf_kernels_is_the_former_name_of_edgeinf_isa():
    import edgeinf.kernels as former

    for name in former.__all__:
        assert getattr(former, name) is globals()[name], name


def _cpuinfo_flags() -> set[str]:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(platform.machine() != "x86_64" or not os.path.exists("/proc/cpuinfo"), reason="x86-64 Linux only")
def test_vnni_features_agree_with_the_kernel():
    # CPUID as read by the native module against Linux's own reading (which also drops
    # what the OS does not save, as the XCR0 check does).
    flags = _cpuinfo_flags()
    assert cpu_features()["avx512_vnni"] == ({"avx512f", "avx512bw", "avx512_vnni"} <= flags)
    assert cpu_features()["avx_vnni"] == ("avx_vnni" in flags)
    # AMX: Linux lists amx_tile / amx_int8 only where it saves the tile state; the module
    # also asks for the process's permission, which a sandbox may refuse
    if cpu_features()["amx_int8"]:
        assert {"amx_tile", "amx_int8", "avx512_vnni"} <= flags


@pytest.mark.parametrize("path", sorted(X86_PATHS))
def test_environment_refuses_a_vnni_path_the_cpu_lacks(path):
    if path in supported_isas():
        pytest.skip(f"this CPU runs {path}")
    proc = run_with_env(path)
    assert proc.returncode != 0
    assert f"EDGEINF_ISA='{path}'" in proc.stderr and "not usable here" in proc.stderr


@pytest.mark.parametrize("path", sorted(X86_PATHS))
def test_environment_forces_a_vnni_path_the_cpu_has(path):
    if path not in supported_isas():
        pytest.skip(f"this CPU lacks {path} (cpu_features: {cpu_features()})")
    proc = run_with_env(path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == path


def test_the_best_x86_path_is_the_widest_dot_product():
    supported = supported_isas()
    widest_first = ("avx512amx", "avx512vnni", "avx2vnni", "neondot", "neon", "avx2")
    best = next((p for p in widest_first if p in supported), "scalar")
    assert _C.best_isa() == best


def test_the_emulated_vnni_path_is_usable_but_never_chosen_or_listed():
    if "avx2" not in supported_isas():
        assert emulated_isas() == []
        return
    assert emulated_isas() == ["avx2-emulated-vnni"]
    assert "avx2-emulated-vnni" not in supported_isas() + built_isas()
    assert _C.best_isa() != "avx2-emulated-vnni"
    with use_isa("avx2-emulated-vnni"):
        assert active_isa() == "avx2-emulated-vnni"
        assert _C._gemm_variant() == "avx2-emulated-vnni"
