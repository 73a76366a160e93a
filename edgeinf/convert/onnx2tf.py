"""ONNX -> TFLite with onnx2tf, when it and TensorFlow are installed (an optional, heavy pair).

onnx2tf writes NHWC models: a 4-D NCHW input becomes NHWC in the .tflite, and so do
4-D outputs. Verification lines them up again (`edgeinf.convert.verify`).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import BackendUnavailableError, RuntimeFailure

log = logging.getLogger(__name__)

TIMEOUT_S = 1800
"""onnx2tf builds a TensorFlow graph first: much slower than pnnx."""


def missing() -> list[str]:
    """The packages the TFLite conversion needs that are not installed (none: it can run)."""
    return [name for name in ("onnx2tf", "tensorflow") if importlib.util.find_spec(name) is None]


def version() -> str:
    from ..compat.tables import installed_version

    return installed_version("onnx2tf") or "unknown"


def to_tflite(
    model: Path, out_dir: Path, input_shapes: dict[str, tuple[int, ...]], *, fp16: bool = False
) -> tuple[Path, list[str]]:
    """Convert ``model`` into ``out_dir/<stem>.tflite`` (float32, or float16 weights with ``fp16``).

    Returns:
        The .tflite and the onnx2tf command line that made it.

    Raises:
        BackendUnavailableError: onnx2tf or TensorFlow is not installed.
        RuntimeFailure: onnx2tf failed (its last lines say why).
    """
    absent = missing()
    if absent:
        raise BackendUnavailableError(
            f"converting to TFLite needs onnx2tf and TensorFlow, and {' and '.join(absent)} "
            f"{'is' if len(absent) == 1 else 'are'} not installed: pip install onnx2tf tensorflow "
            "(about 2 GB; on a board, convert on a desktop and copy the .tflite); "
            "`edgeinf convert --to ncnn` works without them",
            requested=("onnx2tf",),
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{model.stem}.tflite"
    with tempfile.TemporaryDirectory(prefix="edgeinf-onnx2tf-") as scratch:
        command = [sys.executable, "-m", "onnx2tf", "-i", str(model), "-o", scratch, "-n"]
        shapes = [f"{name}:{','.join(str(d) for d in shape)}" for name, shape in input_shapes.items()]
        if shapes:
            command += ["-ois", *shapes]
        log.info("onnx2tf: %s", " ".join(command))
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"onnx2tf did not finish converting {model.name} in {TIMEOUT_S} s") from None
        made = Path(scratch) / f"{model.stem}_{'float16' if fp16 else 'float32'}.tflite"
        if done.returncode != 0 or not made.is_file():
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:] or ["no output"]
            raise RuntimeFailure(
                f"onnx2tf failed to convert {model.name} (exit code {done.returncode}): {' | '.join(tail)}"
            )
        shutil.move(made, target)
    return target, ["onnx2tf", *command[3:]]
