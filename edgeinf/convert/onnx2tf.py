"""ONNX -> TFLite with onnx2tf, when it and TensorFlow are installed (an optional, heavy pair).

onnx2tf writes NHWC models: a 4-D NCHW input becomes NHWC in the .tflite, and so do
4-D outputs. Verification lines them up again (`edgeinf.convert.verify`).

onnx2tf pins its own numpy, onnx, onnxruntime and TensorFlow, which rarely agree with the
environment edgeinf runs in. It can live in a venv of its own: ``EDGEINF_TF_PYTHON``
names that venv's interpreter, and onnx2tf runs there as a separate process.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import BackendUnavailableError, RuntimeFailure

log = logging.getLogger(__name__)

TIMEOUT_S = 1800
"""onnx2tf builds a TensorFlow graph first: much slower than pnnx."""


PYTHON_VARIABLE = "EDGEINF_TF_PYTHON"
"""The environment variable naming a Python interpreter that has onnx2tf and TensorFlow."""

_PACKAGES = ("onnx2tf", "tensorflow")
_PROBE_TIMEOUT_S = 120


def _external_python() -> str | None:
    return os.environ.get(PYTHON_VARIABLE) or None


def _probe(python: str) -> dict:
    """The versions of onnx2tf and TensorFlow that ``python`` has (None for a missing one)."""
    script = (
        "import importlib.metadata as m, json\n"
        "def v(n):\n"
        "    try: return m.version(n)\n"
        "    except m.PackageNotFoundError: return None\n"
        f"print(json.dumps({{n: v(n) for n in {_PACKAGES!r}}}))"
    )
    try:
        done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
        found = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        found = None
    if not isinstance(found, dict):
        raise BackendUnavailableError(
            f"{PYTHON_VARIABLE}={python} is not a Python interpreter that runs: "
            "point it at the python of a venv with onnx2tf and TensorFlow (tools/install_tf.sh makes one)",
            requested=("onnx2tf",),
        )
    return found


def missing() -> list[str]:
    """The packages the TFLite conversion needs that are not installed (none: it can run).

    With ``EDGEINF_TF_PYTHON`` set, that interpreter's packages count, not this one's.
    """
    python = _external_python()
    if python is not None:
        found = _probe(python)
        return [name for name in _PACKAGES if not found.get(name)]
    return [name for name in _PACKAGES if importlib.util.find_spec(name) is None]


def version() -> str:
    python = _external_python()
    if python is not None:
        return _probe(python).get("onnx2tf") or "unknown"
    from ..compat.tables import installed_version

    return installed_version("onnx2tf") or "unknown"


def to_tflite(
    model: Path,
    out_dir: Path,
    input_shapes: dict[str, tuple[int, ...]],
    *,
    fp16: bool = False,
    external: tuple[str, ...] = (),
) -> tuple[Path, list[str]]:
    """Convert ``model`` into ``out_dir/<stem>.tflite`` (float32, or float16 weights with ``fp16``).

    onnx2tf works on a copy (with ``external``, the model's external data files relative
    to it): it writes its simplified graph back over the file it was given. The copy's
    inputs have the fixed shapes: onnx2tf's own shape option misses dimensions stored as
    -1 (PaddlePaddle exports them so). onnx2tf runs in a scratch folder that holds the
    sample images it would otherwise download (`_write_sample_images`).

    Returns:
        The .tflite and the onnx2tf command line that made it.

    Raises:
        BackendUnavailableError: onnx2tf or TensorFlow is not installed.
        RuntimeFailure: onnx2tf failed (its last lines say why).
    """
    absent = missing()
    python = _external_python()
    if absent:
        where = f"in {PYTHON_VARIABLE}={python}" if python else "installed"
        raise BackendUnavailableError(
            f"converting to TFLite needs onnx2tf and TensorFlow, and {' and '.join(absent)} "
            f"{'is' if len(absent) == 1 else 'are'} not {where}: pip install onnx2tf tensorflow "
            f"(about 2 GB; a venv of their own named by {PYTHON_VARIABLE} keeps their pins apart; "
            "on a board, convert on a desktop and copy the .tflite); "
            "`edgeinf convert --to ncnn` works without them",
            requested=("onnx2tf",),
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{model.stem}.tflite"
    with tempfile.TemporaryDirectory(prefix="edgeinf-onnx2tf-") as scratch:
        work = Path(scratch) / "model"
        work.mkdir()
        source = work / model.name
        _write_fixed(model, source, input_shapes)
        for name in external:  # relative paths the reader verified, beside the model
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(model.parent / name, work / name)
        _write_sample_images(Path(scratch))
        output = Path(scratch) / "out"
        output.mkdir()
        command = [python or sys.executable, "-m", "onnx2tf", "-i", str(source), "-o", str(output), "-n"]
        shapes = [f"{name}:{','.join(str(d) for d in shape)}" for name, shape in input_shapes.items()]
        if shapes:
            command += ["-ois", *shapes]
        log.info("onnx2tf: %s", " ".join(command))
        try:
            done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"onnx2tf did not finish converting {model.name} in {TIMEOUT_S} s") from None
        made = output / f"{model.stem}_{'float16' if fp16 else 'float32'}.tflite"
        if done.returncode != 0 or not made.is_file():
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:] or ["no output"]
            raise RuntimeFailure(
                f"onnx2tf failed to convert {model.name} (exit code {done.returncode}): {' | '.join(tail)}"
            )
        shutil.move(made, target)
    return target, ["onnx2tf", "-i", str(model), *command[5:]]


def _write_fixed(model: Path, target: Path, input_shapes: dict[str, tuple[int, ...]]) -> None:
    """``model`` saved as ``target`` with its inputs fixed to ``input_shapes`` and every other
    negative dimension left unknown (onnx2tf infers the rest)."""
    import onnx

    proto = onnx.load(str(model), load_external_data=False)  # external files are copied as they are
    for value in proto.graph.input:
        shape = input_shapes.get(value.name)
        if shape is None or not value.type.HasField("tensor_type"):
            continue
        dims = value.type.tensor_type.shape.dim
        del dims[:]
        for size in shape:
            dims.add().dim_value = int(size)
    for value in [*proto.graph.value_info, *proto.graph.output]:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.Clear()
    # Node names become TensorFlow scope names, which allow fewer characters than ONNX
    # names (PaddlePaddle's "Conv@0"): such names are spelled with "_" instead.
    taken = {node.name for node in proto.graph.node}
    for node in proto.graph.node:
        if node.name and not _SCOPE_NAME.fullmatch(node.name):
            name = _SCOPE_CHAR.sub("_", node.name)
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
    onnx.save(proto, str(target))


_SCOPE_NAME = re.compile(r"[A-Za-z0-9_.\\/>-]*")
_SCOPE_CHAR = re.compile(r"[^A-Za-z0-9_.\\/>-]")


SAMPLE_IMAGES = "calibration_image_sample_data_20x128x128x3_float32.npy"
"""onnx2tf test-runs image models on 20 RGB images of 128x128 in [0, 1], read from this file
in its working folder; without the file it downloads one, which fails offline."""


def _write_sample_images(folder: Path) -> None:
    """`SAMPLE_IMAGES` made from crops of the manifest's portrait."""
    import numpy as np
    from PIL import Image

    from .samples import _photos

    (_, photo), *_ = _photos([])
    width, height = photo.size
    images = []
    for k in range(20):
        shrink = 1.0 - 0.03 * k  # windows from the whole photo towards its centre
        w, h = int(width * shrink), int(height * shrink)
        left, top = (width - w) // 2, (height - h) // 2
        crop = photo.crop((left, top, left + w, top + h)).resize((128, 128), Image.Resampling.BILINEAR)
        images.append(np.asarray(crop, np.float32) / 255.0)
    np.save(folder / SAMPLE_IMAGES, np.stack(images))
