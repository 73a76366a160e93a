"""Int8 versions of the manifest's face models, built by `edgeinf.quantize` and cached.

Built from the float model (`edgeinf.zoo`) and the calibration photos of
``edgeinf/data/int8_models.json``, beside the float model in the zoo's cache. The build
is deterministic for the same inputs and quantizer; its sha256 is recorded in the data
file together with the environment that produced it, and checked on use: a cached file
that does not match is rebuilt, and a fresh build that does not match in the recorded
environment is an error.
"""

from __future__ import annotations

import json
import logging
import platform
from pathlib import Path

from ..errors import ModelFileError

log = logging.getLogger(__name__)
FACE_MODELS = ("face_detection_short_range", "face_detection_full_range", "face_landmark")


def environment() -> dict[str, str]:
    """What a recorded sha256 depends on besides the inputs: quantizer, runtime, CPU architecture."""
    from importlib.metadata import PackageNotFoundError, version

    env = {}
    for dist in ("ai-edge-quantizer", "ai-edge-litert"):
        try:
            env[dist] = version(dist)
        except PackageNotFoundError:
            env[dist] = "missing"
    env["machine"] = platform.machine()
    return env


def cached_path(name: str) -> Path:
    """``<the float model's folder>/int8/<name>.tflite``: beside the float model, under the same
    file name, so that what recognises a face model by its name (`edgeinf.face.FaceDetector`)
    recognises its int8 version too."""
    from .. import zoo

    return zoo.path(name).parent / "int8" / f"{name}.tflite"


def build(name: str, output: Path | None = None):
    """Quantize a face model of the manifest with the recorded settings; returns the `QuantizeResult`."""
    from .. import zoo
    from . import photos, quantize

    if name not in FACE_MODELS:
        raise KeyError(f"no int8 recipe for {name!r}; known: {', '.join(FACE_MODELS)}")
    settings = photos.data()["settings"]
    images = [photos.path(p) for p in photos.names()]
    return quantize(
        zoo.path(name),
        images,
        output or cached_path(name),
        per_channel=settings["per_channel"],
        io=settings["io"],
        task=name,
        progress=False,
    )


def int8_path(name: str) -> Path:
    """The cached int8 model of a manifest face model, built first if missing or not as recorded.

    Raises:
        KeyError: not one of the face models.
        ModelFileError: a fresh build differs from the recorded sha256 in the recorded environment.
    """
    from ..zoo import sha256_of
    from . import photos

    record = photos.data()["models"].get(name)
    path = cached_path(name)
    if path.is_file() and (record is None or sha256_of(path) == record["sha256"]):
        return path
    if path.is_file():
        log.warning("cached %s does not match its recorded sha256: rebuilding", path)
    result = build(name, path)
    if record is not None and result.sha256 != record["sha256"]:
        if record.get("environment") == environment():
            path.unlink(missing_ok=True)
            raise ModelFileError(
                f"int8 {name}: the build gave sha256 {result.sha256}, the recorded one is {record['sha256']} "
                f"in the same environment {environment()}: the inputs changed"
            )
        log.warning(
            "int8 %s: sha256 %s differs from the one recorded in %s (here: %s)",
            name, result.sha256, record.get("environment"), environment(),
        )  # fmt: skip
    return path


def record(names=FACE_MODELS, data_file: Path | None = None) -> dict[str, dict]:
    """Build each model afresh and write its sha256 and environment into the data file."""
    from . import photos

    data_file = data_file or photos.DATA
    data = json.loads(data_file.read_text(encoding="utf-8"))
    for name in names:
        result = build(name, cached_path(name))
        data["models"][name] = {"sha256": result.sha256, "environment": environment()}
    data_file.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    photos.data.cache_clear()
    return data["models"]
