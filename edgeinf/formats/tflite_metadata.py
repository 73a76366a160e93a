"""The TFLite model metadata a converter or Model Maker stores in a .tflite file.

Metadata is a second flatbuffer (schema ``metadata_schema.fbs`` of TFLite Support, file
identifier ``M001``) kept in the model buffer that the model's ``metadata`` entry
``"TFLITE_METADATA"`` names. edgeinf reads the part that changes how an input is fed:
each input tensor's ``NormalizationOptions`` (``(x - mean) / std`` per channel), so
that an image reaches a float model in the range it was trained on.

Only the tables read here are described below (field slots from the schema's field
order); the verifier checks every offset of them before a value is read.

>>> norm = input_normalization(read_tflite(path))      # doctest: +SKIP
>>> norm[0]
Normalization(mean=(127.5,), std=(127.5,))
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFileError
from ._flatbuf import Table, Verifier

METADATA_NAME = "TFLITE_METADATA"
FILE_IDENTIFIER = b"M001"
_MAX_CHANNELS = 4096  # per-channel mean/std of an image input: a few values; more is not an image


def _vector(slot: int, elem: str) -> dict:
    return {"kind": "vector", "slot": slot, "elem": elem}


def _tables(slot: int, table: str) -> dict:
    return {"kind": "vector", "slot": slot, "elem": "table", "table": table}


# Slot of field n is 4 + 2 * n; a union takes two fields: its type (u8), then its value.
_ROOT_TABLE = "ModelMetadata"
_LAYOUT = {
    "root_table": _ROOT_TABLE,
    "tables": {
        "ModelMetadata": {
            "name": {"kind": "string", "slot": 4},
            "subgraph_metadata": _tables(10, "SubGraphMetadata"),
        },
        "SubGraphMetadata": {
            "input_tensor_metadata": _tables(8, "TensorMetadata"),
        },
        "TensorMetadata": {
            "name": {"kind": "string", "slot": 4},
            "process_units": _tables(12, "ProcessUnit"),
        },
        "ProcessUnit": {
            "options_type": {"kind": "scalar", "slot": 4, "type": "u8", "default": 0},
            "options": {"kind": "union", "slot": 6, "type_field": "options_type", "union": "ProcessUnitOptions"},
        },
        "NormalizationOptions": {
            "mean": _vector(4, "f32"),
            "std": _vector(6, "f32"),
        },
    },
    "unions": {"ProcessUnitOptions": {"1": "NormalizationOptions"}},
}


@dataclass(frozen=True)
class Normalization:
    """``(x - mean) / std`` per channel (one value: every channel), in the input's value units."""

    mean: tuple[float, ...]
    std: tuple[float, ...]


def read_metadata_root(data: bytes | memoryview, what: str = "TFLITE_METADATA") -> Table:
    """The verified root ``ModelMetadata`` table of a metadata buffer.

    Raises:
        ModelFileError: not a metadata flatbuffer, or offsets outside the buffer.
    """
    if len(data) < 8 or bytes(data[4:8]) != FILE_IDENTIFIER:
        raise ModelFileError(
            f"{what}: not a TFLite metadata flatbuffer: expected the identifier {FILE_IDENTIFIER!r} at bytes 4..8, "
            f"got {bytes(data[4:8])!r} ({len(data)} bytes)"
        )
    root = Verifier(data, _LAYOUT, what).root(_ROOT_TABLE)
    return Table(data, root, _ROOT_TABLE, _LAYOUT)


def input_normalization(model) -> dict[int, Normalization]:
    """Normalization of each input of the main subgraph that the metadata states.

    Args:
        model: a `TfliteModel` from `edgeinf.formats.tflite.read_tflite`.

    Returns:
        input position (0 = the subgraph's first input) -> `Normalization`; empty when
        the model has no metadata or states none.

    Raises:
        ModelFileError: a metadata buffer that is corrupt, or whose values are unusable
            (a std of 0, mean and std of different lengths, non-finite values).
    """
    data = model.metadata.get(METADATA_NAME)
    if not data:
        return {}
    what = f"{model.path or 'model'}: {METADATA_NAME}"
    root = read_metadata_root(data, what)
    subgraphs = root.get("subgraph_metadata") or []
    if not subgraphs:
        return {}
    found = {}
    for i, tensor in enumerate(subgraphs[0].get("input_tensor_metadata") or []):
        for unit in tensor.get("process_units") or []:
            options = unit.get("options")
            if options is None or options[0] != "NormalizationOptions":
                continue
            found[i] = _normalization(options[1], f"{what}: input {i} ({tensor.get('name')!r})")
            break
    return found


def _normalization(table: Table, where: str) -> Normalization:
    mean = tuple(float(v) for v in (table.get("mean") or ()))
    std = tuple(float(v) for v in (table.get("std") or ()))
    if not mean or not std or len(mean) > _MAX_CHANNELS or len(std) > _MAX_CHANNELS:
        raise ModelFileError(
            f"{where}: NormalizationOptions needs 1..{_MAX_CHANNELS} mean and std values, got "
            f"{len(mean)} and {len(std)}"
        )
    if len(mean) != len(std) and 1 not in (len(mean), len(std)):
        raise ModelFileError(f"{where}: NormalizationOptions has {len(mean)} means but {len(std)} stds")
    if any(v != v or v in (float("inf"), float("-inf")) for v in mean + std) or any(v == 0 for v in std):
        raise ModelFileError(
            f"{where}: NormalizationOptions needs finite values and a non-zero std, got "
            f"mean={list(mean)} std={list(std)}"
        )
    return Normalization(mean, std)
