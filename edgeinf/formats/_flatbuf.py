"""A flatbuffer verifier and reader driven by a layout table (no generated code needed).

The layout (``tflite_layout.json``) is generated from the schema module a runtime ships
(``tools/gen_tflite_layout.py``): for each table, each field's vtable slot and kind.
``verify`` walks every table, vector, string and union reachable from the root and
checks each offset, vtable and length against the buffer before anything is read, so
a truncated or hostile file becomes a `ModelFileError` naming the field and the bytes,
never an IndexError deep inside a reader or a crash inside a runtime. ``Table`` then
reads verified data.

Flatbuffers in brief: the file starts with a uoffset to the root table; a table starts
with an soffset back to its vtable; the vtable holds (vtable bytes, object bytes, one
u16 field offset per slot); offsets to strings, vectors and sub-tables are uoffsets
relative to where they are stored; vectors and strings start with a u32 length.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

import numpy as np

from ..errors import ModelFileError

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_SCALAR = {
    "bool": (struct.Struct("<?"), 1, np.dtype(np.bool_)),
    "i8": (struct.Struct("<b"), 1, np.dtype(np.int8)),
    "u8": (struct.Struct("<B"), 1, np.dtype(np.uint8)),
    "i16": (struct.Struct("<h"), 2, np.dtype("<i2")),
    "u16": (struct.Struct("<H"), 2, np.dtype("<u2")),
    "i32": (struct.Struct("<i"), 4, np.dtype("<i4")),
    "u32": (struct.Struct("<I"), 4, np.dtype("<u4")),
    "i64": (struct.Struct("<q"), 8, np.dtype("<i8")),
    "u64": (struct.Struct("<Q"), 8, np.dtype("<u8")),
    "f32": (struct.Struct("<f"), 4, np.dtype("<f4")),
    "f64": (struct.Struct("<d"), 8, np.dtype("<f8")),
}
_MAX_DEPTH = 64  # the TFLite schema nests at most ~8 deep; deeper means a cycle or an attack


@cache
def load_layout(name: str) -> dict:
    """The layout data file ``edgeinf/formats/<name>.json``."""
    with open(Path(__file__).parent / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)


class Verifier:
    """Checks that every byte a reader will touch lies inside the buffer.

    Args:
        buf: the whole file.
        layout: a layout dict from `load_layout`.
        what: how to call the file in messages (e.g. ``"face.tflite"``).
    """

    def __init__(self, buf: bytes | memoryview, layout: dict, what: str = "model"):
        self.buf = buf
        self.n = len(buf)
        self.tables = layout["tables"]
        self.unions = layout["unions"]
        self.what = what
        self._seen: set[tuple[int, str]] = set()

    def fail(self, path: str, message: str) -> None:
        raise ModelFileError(f"{self.what}: {path}: {message}")

    def need(self, start: int, size: int, path: str) -> None:
        if start < 0 or start > self.n:
            self.fail(path, f"points to byte {start}, outside the file's {self.n} bytes")
        if start + size > self.n:
            self.fail(
                path, f"needs bytes {start}..{start + size} but the file ends at byte {self.n} (truncated or corrupt)"
            )

    def uoffset_target(self, at: int, path: str) -> int:
        self.need(at, 4, path)
        target = at + _U32.unpack_from(self.buf, at)[0]
        self.need(target, 4, path)
        return target

    def root(self, root_table: str) -> int:
        self.need(0, 8, "header")
        pos = self.uoffset_target(0, root_table)
        self.table(pos, root_table, root_table, 0)
        return pos

    def table(self, pos: int, tname: str, path: str, depth: int) -> None:
        if (pos, tname) in self._seen:
            return  # shared sub-tables are verified once: keeps hostile DAGs linear
        if depth > _MAX_DEPTH:
            self.fail(path, f"nesting deeper than {_MAX_DEPTH} tables")
        self.need(pos, 4, path)
        vtable = pos - _I32.unpack_from(self.buf, pos)[0]
        self.need(vtable, 4, path + " (vtable)")
        vt_size, obj_size = _U16.unpack_from(self.buf, vtable)[0], _U16.unpack_from(self.buf, vtable + 2)[0]
        if vt_size < 4 or vt_size % 2:
            self.fail(path, f"vtable at byte {vtable} has size {vt_size}, expected an even size >= 4")
        if obj_size < 4:
            self.fail(path, f"table at byte {pos} has object size {obj_size}, expected >= 4")
        self.need(vtable, vt_size, path + " (vtable)")
        self.need(pos, obj_size, path)
        self._seen.add((pos, tname))
        fields = self.tables[tname]
        for fname, field in fields.items():
            slot = field["slot"]
            if slot + 2 > vt_size:
                continue
            off = _U16.unpack_from(self.buf, vtable + slot)[0]
            if off == 0:
                continue
            fpath = f"{path}.{fname}"
            kind = field["kind"]
            size = _SCALAR[field["type"]][1] if kind == "scalar" else 4
            if off + size > obj_size:
                self.fail(fpath, f"field at offset {off} (+{size} bytes) lies outside its table's {obj_size} bytes")
            at = pos + off
            if kind == "scalar":
                continue
            target = self.uoffset_target(at, fpath)
            if kind == "table":
                self.table(target, field["table"], fpath, depth + 1)
            elif kind == "string":
                self.vector(target, 1, fpath, extra=1)
            elif kind == "vector":
                self.vector_field(target, field, fpath, depth)
            elif kind == "union":
                utype = self.scalar_at(pos, vtable, vt_size, fields[field["type_field"]])
                member = self.unions[field["union"]].get(str(utype))
                if member is not None:  # unknown members are skipped, as flatc's verifiers do
                    self.table(target, member, f"{fpath}<{member}>", depth + 1)

    def scalar_at(self, pos: int, vtable: int, vt_size: int, field: dict):
        slot = field["slot"]
        if slot + 2 > vt_size:
            return field["default"]
        off = _U16.unpack_from(self.buf, vtable + slot)[0]
        return field["default"] if off == 0 else _SCALAR[field["type"]][0].unpack_from(self.buf, pos + off)[0]

    def vector(self, target: int, elem_size: int, path: str, extra: int = 0) -> int:
        length = _U32.unpack_from(self.buf, target)[0]
        self.need(target + 4, length * elem_size + extra, f"{path} ({length} elements)")
        return length

    def vector_field(self, target: int, field: dict, path: str, depth: int) -> None:
        elem = field["elem"]
        if elem in _SCALAR:
            self.vector(target, _SCALAR[elem][1], path)
            return
        length = self.vector(target, 4, path)
        for i in range(length):
            item = self.uoffset_target(target + 4 + 4 * i, f"{path}[{i}]")
            if elem == "table":
                self.table(item, field["table"], f"{path}[{i}]", depth + 1)
            else:
                self.vector(item, 1, f"{path}[{i}]", extra=1)


class Table:
    """Reads fields of a verified table by their schema (snake_case) names."""

    __slots__ = ("buf", "pos", "tname", "fields", "vtable", "vt_size", "layout")

    def __init__(self, buf, pos: int, tname: str, layout: dict):
        self.buf, self.pos, self.tname, self.layout = buf, pos, tname, layout
        self.fields = layout["tables"][tname]
        self.vtable = pos - _I32.unpack_from(buf, pos)[0]
        self.vt_size = _U16.unpack_from(buf, self.vtable)[0]

    def _offset(self, field: dict) -> int:
        slot = field["slot"]
        return 0 if slot + 2 > self.vt_size else _U16.unpack_from(self.buf, self.vtable + slot)[0]

    def has(self, name: str) -> bool:
        return self._offset(self.fields[name]) != 0

    def _target(self, off: int) -> int:
        at = self.pos + off
        return at + _U32.unpack_from(self.buf, at)[0]

    def get(self, name: str):
        """A field's value: scalar (or its default), str, Table, list of Table/str,
        numpy array for scalar vectors, ``(member_table_name, Table)`` for unions;
        None when an offset field is absent."""
        field = self.fields[name]
        off = self._offset(field)
        kind = field["kind"]
        if kind == "scalar":
            return field["default"] if off == 0 else _SCALAR[field["type"]][0].unpack_from(self.buf, self.pos + off)[0]
        if off == 0:
            return None
        target = self._target(off)
        if kind == "table":
            return Table(self.buf, target, field["table"], self.layout)
        if kind == "string":
            length = _U32.unpack_from(self.buf, target)[0]
            return bytes(self.buf[target + 4 : target + 4 + length]).decode("utf-8", errors="replace")
        if kind == "union":
            utype = self.get(field["type_field"])
            member = self.layout["unions"][field["union"]].get(str(utype))
            return None if member is None else (member, Table(self.buf, target, member, self.layout))
        length = _U32.unpack_from(self.buf, target)[0]
        elem = field["elem"]
        if elem in _SCALAR:
            return np.frombuffer(self.buf, dtype=_SCALAR[elem][2], count=length, offset=target + 4)
        items = []
        for i in range(length):
            at = target + 4 + 4 * i
            item = at + _U32.unpack_from(self.buf, at)[0]
            if elem == "table":
                items.append(Table(self.buf, item, field["table"], self.layout))
            else:
                n = _U32.unpack_from(self.buf, item)[0]
                items.append(bytes(self.buf[item + 4 : item + 4 + n]).decode("utf-8", errors="replace"))
        return items

    def vector_span(self, name: str) -> tuple[int, int] | None:
        """(byte offset of the first element, element count) of a vector field, or None."""
        off = self._offset(self.fields[name])
        if off == 0:
            return None
        target = self._target(off)
        return target + 4, _U32.unpack_from(self.buf, target)[0]

    def to_dict(self) -> dict:
        """Every present scalar and scalar-vector field (used for operator options)."""
        out = {}
        for name, field in self.fields.items():
            kind = field["kind"]
            if kind == "scalar":
                out[name] = self.get(name)
            elif kind == "vector" and field["elem"] in _SCALAR:
                value = self.get(name)
                if value is not None:
                    out[name] = tuple(value.tolist())
            elif kind == "string":
                value = self.get(name)
                if value is not None:
                    out[name] = value
        return out
