"""Fixtures of the cache tests: a private EDGEINF_CACHE holding copies of real models, and a
wheelhouse built from the same bytes so that fetching again needs no network."""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from edgeinf import zoo

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cache_tools import NAME  # noqa: E402


@pytest.fixture
def cache(tmp_path, monkeypatch, model_path):
    """A private cache holding a copy of NAME's real files; returns the copied main file."""
    source = model_path(NAME).parent
    target = tmp_path / "cache" / "models" / NAME
    target.mkdir(parents=True)
    for fname in zoo.entry(NAME)["files"]:  # the manifest's files only, not what else lives beside them
        shutil.copy2(source / fname, target / fname)
    monkeypatch.setenv("EDGEINF_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("EDGEINF_WHEELHOUSE", str(tmp_path / "no-wheels-here"))
    return target / zoo.entry(NAME)["main"]


@pytest.fixture
def wheelhouse(cache, tmp_path, monkeypatch):
    """A wheel named as the manifest's package, carrying NAME's real files at their member paths."""
    item = zoo.entry(NAME)
    dist, _, version = item["package"].partition("==")
    folder = tmp_path / "wheelhouse"
    folder.mkdir()
    wheel = folder / f"{dist.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for fname, spec in item["files"].items():
            zf.writestr(spec["member"], (cache.parent / fname).read_bytes())
    monkeypatch.setenv("EDGEINF_WHEELHOUSE", str(folder))
    return wheel
