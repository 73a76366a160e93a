"""Run-time dispatch: the best usable path by default, forcing by EDGEINF_ISA or use_isa."""

import os
import platform
import subprocess
import sys

import pytest

from edgeinf.isa import active_isa, built_isas, cpu_features, set_isa, supported_isas, use_isa


def test_best_path_is_active_and_supported():
    supported = supported_isas()
    assert supported[0] == "scalar"
    assert active_isa() == supported[-1] or "EDGEINF_ISA" in os.environ
    assert set(supported) <= set(built_isas())


def test_built_paths_follow_the_architecture():
    built = set(built_isas())
    if platform.machine() == "x86_64":
        assert built == {"scalar", "avx2"}
        assert ("avx2" in supported_isas()) == (cpu_features()["avx2"] and cpu_features()["fma"])
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
