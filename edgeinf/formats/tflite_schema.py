"""The generated TFLite schema module (Object API), loaded without importing a runtime.

ai-edge-litert ships ``ai_edge_litert/schema_py_generated.py`` (flatc output for
TFLite's ``schema.fbs``, for the ``flatbuffers`` package). It is found with
``importlib.util.find_spec`` (which locates the package without running its
``__init__``) and loaded by path under a private name, so neither the interpreter
nor its native libraries are loaded.

tflite-runtime ships no schema module. Reading a .tflite does not need one
(`edgeinf.formats.tflite` walks the file with the layout generated from this module);
only writing models (`tflite_writer`) and decoding options into schema objects do.
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from ..errors import BackendUnavailableError

_PRIVATE_NAME = "edgeinf._tflite_schema_generated"


def schema_path() -> Path | None:
    """Where the installed ai-edge-litert keeps its schema module, or None."""
    try:
        spec = importlib.util.find_spec("ai_edge_litert")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / "schema_py_generated.py"
    return candidate if candidate.is_file() else None


@lru_cache(maxsize=1)
def schema() -> ModuleType:
    """The generated schema module.

    Raises:
        BackendUnavailableError: ai-edge-litert (which carries the module) is not installed.
    """
    path = schema_path()
    if path is None:
        raise BackendUnavailableError(
            "writing .tflite models needs the TFLite schema module shipped by ai-edge-litert; "
            "install it with `pip install edgeinf[tflite]` (tflite-runtime ships no schema module)",
            requested=("ai_edge_litert",),
        )
    spec = importlib.util.spec_from_file_location(_PRIVATE_NAME, path)
    if spec is None or spec.loader is None:
        raise BackendUnavailableError(
            f"{path}: not a Python module to load the TFLite schema from", requested=("ai_edge_litert",)
        )
    module = importlib.util.module_from_spec(spec)
    sys.modules[_PRIVATE_NAME] = module
    spec.loader.exec_module(module)
    return module
