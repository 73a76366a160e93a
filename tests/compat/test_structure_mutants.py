"""Structured mutants of a real model that crash or fool a runtime are refused by edgeinf, for
every runtime, before the runtime sees them.

Each mutant breaks one rule (tests/formats/tflite_mutants.py). The runtimes run it in a child
process (tools/runtime_worker.py); edgeinf's `load` runs in another, so a regression shows
as a failed test, not a dead test process.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "formats"))
from tflite_mutants import MUTANTS, mutate, random_mutant  # noqa: E402

from edgeinf.errors import ModelFileError  # noqa: E402
from edgeinf.formats.tflite import read_tflite  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutants(model_path, tmp_path_factory):
    data = model_path("face_detection_short_range").read_bytes()
    folder = tmp_path_factory.mktemp("mutants")
    paths = {}
    for name in MUTANTS:
        paths[name] = folder / f"{name}.tflite"
        paths[name].write_bytes(mutate(data, name))
    return paths


def _load_in_child(path: Path) -> subprocess.CompletedProcess:
    code = "import sys, edgeinf; edgeinf.load(sys.argv[1], num_threads=1)"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)


def test_litert_crashes_on_the_split_mutant_and_edgeinf_refuses_it(mutants, litert_worker):
    path = mutants["split_with_one_input"]
    reply = litert_worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
    assert not reply["ok"], reply  # XNNPACK reads the missing second input: a segfault in LiteRT 2.3.0
    result = _load_in_child(path)
    assert result.returncode == 1 and "ModelFileError" in result.stderr, result.stderr[-2000:]
    assert "(SPLIT): 1 inputs, expected 2" in result.stderr


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_no_mutant_reaches_a_runtime(mutants, name):
    result = _load_in_child(mutants[name])
    assert result.returncode == 1 and "ModelFileError" in result.stderr, (result.returncode, result.stderr[-2000:])


def test_runtimes_survive_or_fail_on_mutants_edgeinf_refuses(mutants, tflite_workers):
    """What each runtime does with each mutant (the reason edgeinf refuses them all): at least
    one mutant crashes a runtime or runs to completion on a broken graph."""
    outcomes = {}
    for target, worker in tflite_workers.items():
        for name, path in mutants.items():
            reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
            outcomes[(target, name)] = "crash" if reply.get("crashed") else ("ran" if reply["ok"] else "error")
    assert "crash" in outcomes.values() and "ran" in outcomes.values(), outcomes


def test_random_mutants_edgeinf_accepts_do_not_crash_a_runtime(model_path, tflite_workers, tmp_path):
    """Random one-node edits of two real models (fixed seeds): every one the reader lets
    through must load, fail cleanly or run in both runtimes, never crash them."""
    crashes = []
    for name, seed in (("face_detection_short_range", 1), ("face_landmark", 11)):
        data = model_path(name).read_bytes()
        rng = random.Random(seed)
        for k in range(60):
            what, mutant = random_mutant(data, rng)
            try:
                read_tflite(mutant)
            except ModelFileError:
                continue
            path = tmp_path / f"{name}-{k}.tflite"
            path.write_bytes(mutant)
            for target, worker in tflite_workers.items():
                reply = worker.ask({"kind": "tflite", "path": str(path), "action": "run", "delegate": True})
                if reply.get("crashed"):
                    crashes.append(f"{name} mutant {k} ({what}) crashed {target}")
    assert not crashes, crashes
