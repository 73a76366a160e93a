"""ONNX -> NCNN with pnnx (the binary from the ``pnnx`` package; ONNX input needs no torch).

pnnx writes its intermediate files beside the model it reads, so it runs in a scratch
folder on a copy; only the ``.param`` and ``.bin`` are kept. Blob names follow pnnx:
graph inputs become ``in0, in1, ...`` and outputs ``out0, out1, ...`` in ONNX order.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import BackendUnavailableError, RuntimeFailure

log = logging.getLogger(__name__)

TIMEOUT_S = 600
"""The longest a conversion may take; pnnx converts the models edgeinf knows in seconds."""


def binary(explicit: str | os.PathLike | None = None) -> Path:
    """The pnnx executable: ``explicit``, else the one inside the installed ``pnnx`` package.

    The package's own ``pnnx`` console script imports torch; the binary beside it does not.

    Raises:
        BackendUnavailableError: no pnnx binary is installed.
    """
    if explicit is not None:
        path = Path(explicit)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BackendUnavailableError(
                f"pnnx binary {path} does not exist or is not executable", requested=("pnnx",)
            )
        return path
    spec = importlib.util.find_spec("pnnx")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            for name in ("pnnx", "pnnx.exe"):
                candidate = Path(folder) / name
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return candidate
    raise BackendUnavailableError(
        "converting to NCNN needs the pnnx binary: pip install --no-deps pnnx (no torch needed for ONNX input)",
        requested=("pnnx",),
    )


def version() -> str:
    from ..compat.tables import installed_version

    return installed_version("pnnx") or "unknown"


def _shape_arg(shapes: list[tuple[int, ...]]) -> str:
    return ",".join("[" + ",".join(str(d) for d in shape) + "]" for shape in shapes)


def to_ncnn(
    model: Path,
    out_dir: Path,
    input_shapes: list[tuple[int, ...]],
    *,
    fp16: bool = False,
    external: tuple[str, ...] = (),
    pnnx=None,
) -> tuple[Path, Path, list[str]]:
    """Convert ``model`` into ``out_dir/<stem>.param`` and ``.bin``.

    ``external`` names the model's external data files (relative to it), copied along.

    Returns:
        The .param, the .bin, and the pnnx command line that made them.

    Raises:
        BackendUnavailableError: pnnx is not installed.
        RuntimeFailure: pnnx failed (its last lines say why) or wrote no NCNN files.
    """
    exe = binary(pnnx)
    out_dir.mkdir(parents=True, exist_ok=True)
    param, weights = out_dir / f"{model.stem}.param", out_dir / f"{model.stem}.bin"
    with tempfile.TemporaryDirectory(prefix="edgeinf-pnnx-") as scratch:
        work = Path(scratch)
        source = work / "model.onnx"
        shutil.copyfile(model, source)
        for name in external:  # relative paths the reader verified, beside the model
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(model.parent / name, work / name)
        command = [str(exe), source.name, f"inputshape={_shape_arg(input_shapes)}", f"fp16={int(fp16)}"]
        log.info("pnnx: %s", " ".join(command))
        try:
            done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeFailure(f"pnnx did not finish converting {model.name} in {TIMEOUT_S} s") from None
        made_param, made_bin = work / "model.ncnn.param", work / "model.ncnn.bin"
        if done.returncode != 0 or not made_param.is_file() or not made_bin.is_file():
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:] or ["no output"]
            raise RuntimeFailure(
                f"pnnx failed to convert {model.name} (exit code {done.returncode}): {' | '.join(tail)}"
            )
        shutil.move(made_param, param)
        shutil.move(made_bin, weights)
    shown = [exe.name, model.name, *command[2:]]
    return param, weights, shown
