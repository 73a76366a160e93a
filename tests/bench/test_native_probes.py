"""The benchmarks' native probes build outside the package and measure what they claim."""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from edgeinf import _C

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def probes(tmp_path_factory, monkeypatch_module):
    if not (REPO / "csrc").is_dir():
        pytest.skip("the C++ sources (csrc/) are not in this tree")
    compiler = (sysconfig.get_config_var("CXX") or "c++").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C++ compiler ({compiler}) to build the benchmark probes")
    monkeypatch_module.setenv("EDGEINF_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch_module.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("native_probes", REPO / "benchmarks" / "native_probes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_the_shipped_extension_carries_no_probe():
    assert not [name for name in dir(_C) if name in ("read_rows_probe", "int8_peak_probe", "int8_vnni_peak_probe")]


@pytest.mark.slow  # builds the probes: tens of seconds of C++ compiling
def test_row_read_probe_reads_exactly_the_listed_rows(probes):
    # The benchmark's lower bound must load every byte of the listed rows and no others.
    plane = np.zeros((9, 150), np.uint8)  # two 64-byte blocks and a 22-byte tail
    plane[2, 149], plane[5, 0], plane[7, 70], plane[8, 100] = 1, 2, 64, 128
    assert probes.read_rows_probe(plane, np.array([2, 5, 7], np.int64)) == 1 | 2 | 64
    assert probes.read_rows_probe(plane, np.array([8], np.int64)) == 128
    assert probes.read_rows_probe(plane, np.array([0, 1, 3, 4, 6], np.int64)) == 0
    with pytest.raises(ValueError, match="index 9 at position 1 is outside the plane's 9 rows"):
        probes.read_rows_probe(plane, np.array([0, 9], np.int64))
    with pytest.raises(ValueError, match="rows: expected dtype int64, got int32"):
        probes.read_rows_probe(plane, np.array([0], np.int32))
    with pytest.raises(ValueError, match="plane: expected 2 dimensions"):
        probes.read_rows_probe(plane.reshape(-1), np.array([0], np.int64))


@pytest.mark.slow  # builds the probes: tens of seconds of C++ compiling
def test_int8_peak_probe_counts_its_operations_where_the_cpu_has_avx2(probes):
    ops = probes.int8_peak_probe(1000)
    if platform.machine().lower() in ("x86_64", "amd64") and _C.cpu_features()["avx2"]:
        assert ops == 1000 * 6 * 64
    else:
        assert ops is None


@pytest.mark.slow  # builds the probes: tens of seconds of C++ compiling
def test_vnni_peak_probe_counts_its_operations_where_the_cpu_has_avx512_vnni(probes):
    ops = probes.int8_vnni_peak_probe(1000)
    if platform.machine().lower() in ("x86_64", "amd64") and _C.cpu_features().get("avx512_vnni"):
        assert ops == 1000 * 12 * 128
    else:
        assert ops is None
