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


_SCALAR_KIND, _TABLE, _STRING, _VEC_SCALAR, _VEC_TABLE, _VEC_STRING, _UNION = range(7)


def _compile(layout: dict) -> dict[str, tuple]:
    """Per table, its fields as tuples sorted by slot: (name, slot, kind, size, extra)."""
    compiled = layout.get("_compiled")
    if compiled is not None:
        return compiled
    compiled = {}
    for tname, fields in layout["tables"].items():
        rows: list[tuple] = []  # the last item's type depends on the kind
        for fname, f in fields.items():
            kind = f["kind"]
            if kind == "scalar":
                rows.append((fname, f["slot"], _SCALAR_KIND, _SCALAR[f["type"]][1], None))
            elif kind == "table":
                rows.append((fname, f["slot"], _TABLE, 4, f["table"]))
            elif kind == "string":
                rows.append((fname, f["slot"], _STRING, 4, None))
            elif kind == "vector" and f["elem"] in _SCALAR:
                rows.append((fname, f["slot"], _VEC_SCALAR, 4, _SCALAR[f["elem"]][1]))
            elif kind == "vector" and f["elem"] == "table":
                rows.append((fname, f["slot"], _VEC_TABLE, 4, f["table"]))
            elif kind == "vector":
                rows.append((fname, f["slot"], _VEC_STRING, 4, None))
            else:
                tf = fields[f["type_field"]]
                rows.append(
                    (
                        fname,
                        f["slot"],
                        _UNION,
                        4,
                        (layout["unions"][f["union"]], tf["slot"], _SCALAR[tf["type"]][0], tf["default"]),
                    )
                )
        compiled[tname] = tuple(sorted(rows, key=lambda r: r[1]))
    layout["_compiled"] = compiled
    return compiled


def _path(p) -> str:
    """Paths are built lazily as nested tuples (parent, piece); formatted only for a message."""
    parts = []
    while isinstance(p, tuple):
        p, piece = p
        parts.append(piece)
    parts.append(p)
    return "".join(reversed(parts))


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
        self.compiled = _compile(layout)
        self.what = what
        self._seen: set[tuple[int, str]] = set()

    def fail(self, path, message: str) -> None:
        raise ModelFileError(f"{self.what}: {_path(path)}: {message}")

    def need(self, start: int, size: int, path) -> None:
        if start < 0 or start > self.n:
            self.fail(path, f"points to byte {start}, outside the file's {self.n} bytes")
        if start + size > self.n:
            self.fail(
                path, f"needs bytes {start}..{start + size} but the file ends at byte {self.n} (truncated or corrupt)"
            )

    def uoffset_target(self, at: int, path) -> int:
        if at < 0 or at + 4 > self.n:
            self.need(at, 4, path)
        target = at + _U32.unpack_from(self.buf, at)[0]
        if target + 4 > self.n:
            self.need(target, 4, path)
        return target

    def root(self, root_table: str) -> int:
        self.need(0, 8, "header")
        pos = self.uoffset_target(0, root_table)
        self.table(pos, root_table, root_table, 0)
        return pos

    def table(self, pos: int, tname: str, path, depth: int) -> None:
        key = (pos, tname)
        if key in self._seen:
            return  # shared sub-tables are verified once: keeps hostile DAGs linear
        if depth > _MAX_DEPTH:
            self.fail(path, f"nesting deeper than {_MAX_DEPTH} tables")
        buf, n = self.buf, self.n
        if pos < 0 or pos + 4 > n:
            self.need(pos, 4, path)
        vtable = pos - _I32.unpack_from(buf, pos)[0]
        if vtable < 0 or vtable + 4 > n:
            self.need(vtable, 4, (path, " (vtable)"))
        vt_size, obj_size = _U16.unpack_from(buf, vtable)[0], _U16.unpack_from(buf, vtable + 2)[0]
        if vt_size < 4 or vt_size % 2:
            self.fail(path, f"vtable at byte {vtable} has size {vt_size}, expected an even size >= 4")
        if obj_size < 4:
            self.fail(path, f"table at byte {pos} has object size {obj_size}, expected >= 4")
        if vtable + vt_size > n:
            self.need(vtable, vt_size, (path, " (vtable)"))
        if pos + obj_size > n:
            self.need(pos, obj_size, path)
        self._seen.add(key)
        for fname, slot, kind, size, extra in self.compiled[tname]:
            if slot + 2 > vt_size:
                break  # fields are sorted by slot: the rest are absent too
            off = _U16.unpack_from(buf, vtable + slot)[0]
            if off == 0:
                continue
            if off + size > obj_size:
                self.fail(
                    (path, "." + fname),
                    f"field at offset {off} (+{size} bytes) lies outside its table's {obj_size} bytes",
                )
            if kind == _SCALAR_KIND:
                continue
            fpath = (path, "." + fname)
            target = self.uoffset_target(pos + off, fpath)
            if kind == _TABLE:
                self.table(target, extra, fpath, depth + 1)
            elif kind == _STRING:
                self.vector(target, 1, fpath, 1)
            elif kind == _VEC_SCALAR:
                self.vector(target, extra, fpath, 0)
            elif kind in (_VEC_TABLE, _VEC_STRING):
                length = self.vector(target, 4, fpath, 0)
                for i in range(length):
                    item = self.uoffset_target(target + 4 + 4 * i, (fpath, f"[{i}]"))
                    if kind == _VEC_TABLE:
                        self.table(item, extra, (fpath, f"[{i}]"), depth + 1)
                    else:
                        self.vector(item, 1, (fpath, f"[{i}]"), 1)
            else:
                members, type_slot, type_struct, default = extra
                utype = default
                if type_slot + 2 <= vt_size:
                    toff = _U16.unpack_from(buf, vtable + type_slot)[0]
                    if toff:
                        utype = type_struct.unpack_from(buf, pos + toff)[0]
                member = members.get(str(utype))
                if member is not None:  # unknown members are skipped, as flatc's verifiers do
                    self.table(target, member, (fpath, f"<{member}>"), depth + 1)

    def vector(self, target: int, elem_size: int, path, extra: int = 0) -> int:
        length = _U32.unpack_from(self.buf, target)[0]
        if target + 4 + length * elem_size + extra > self.n:
            self.need(target + 4, length * elem_size + extra, (path, f" ({length} elements)"))
        return length


def _readers(layout: dict) -> dict[str, dict[str, tuple]]:
    """Per table, name -> (slot, kind, struct or elem info, extra, default) for fast reads."""
    readers = layout.get("_readers")
    if readers is not None:
        return readers
    readers = {}
    for tname, fields in layout["tables"].items():
        spec: dict[str, tuple] = {}  # the items' types depend on the kind
        for fname, f in fields.items():
            kind = f["kind"]
            if kind == "scalar":
                spec[fname] = (f["slot"], _SCALAR_KIND, _SCALAR[f["type"]][0], None, f["default"])
            elif kind == "table":
                spec[fname] = (f["slot"], _TABLE, None, f["table"], None)
            elif kind == "string":
                spec[fname] = (f["slot"], _STRING, None, None, None)
            elif kind == "vector" and f["elem"] in _SCALAR:
                spec[fname] = (f["slot"], _VEC_SCALAR, _SCALAR[f["elem"]], f["elem"], None)
            elif kind == "vector" and f["elem"] == "table":
                spec[fname] = (f["slot"], _VEC_TABLE, None, f["table"], None)
            elif kind == "vector":
                spec[fname] = (f["slot"], _VEC_STRING, None, None, None)
            else:
                spec[fname] = (f["slot"], _UNION, f["type_field"], layout["unions"][f["union"]], None)
        readers[tname] = spec
    layout["_readers"] = readers
    return readers


_SMALL_VECTOR = 64  # shorter scalar vectors come back as tuples (cheaper than numpy views)


class Table:
    """Reads fields of a verified table by their schema (snake_case) names."""

    __slots__ = ("buf", "pos", "tname", "spec", "vtable", "vt_size", "layout")

    def __init__(self, buf, pos: int, tname: str, layout: dict):
        self.buf, self.pos, self.tname, self.layout = buf, pos, tname, layout
        self.spec = _readers(layout)[tname]
        self.vtable = pos - _I32.unpack_from(buf, pos)[0]
        self.vt_size = _U16.unpack_from(buf, self.vtable)[0]

    def _offset(self, slot: int) -> int:
        return 0 if slot + 2 > self.vt_size else _U16.unpack_from(self.buf, self.vtable + slot)[0]

    def has(self, name: str) -> bool:
        return self._offset(self.spec[name][0]) != 0

    def get(self, name: str):
        """A field's value: scalar (or its default), str, Table, list of Table/str,
        tuple (short) or numpy array (long) for scalar vectors, ``(member_table_name, Table)``
        for unions; None when an offset field is absent."""
        slot, kind, info, extra, default = self.spec[name]
        off = self._offset(slot)
        buf = self.buf
        if kind == _SCALAR_KIND:
            return default if off == 0 else info.unpack_from(buf, self.pos + off)[0]
        if off == 0:
            return None
        at = self.pos + off
        target = at + _U32.unpack_from(buf, at)[0]
        if kind == _TABLE:
            return Table(buf, target, extra, self.layout)
        if kind == _STRING:
            length = _U32.unpack_from(buf, target)[0]
            return bytes(buf[target + 4 : target + 4 + length]).decode("utf-8", errors="replace")
        if kind == _UNION:
            utype = self.get(info)
            member = extra.get(str(utype))
            return None if member is None else (member, Table(buf, target, member, self.layout))
        length = _U32.unpack_from(buf, target)[0]
        if kind == _VEC_SCALAR:
            st, size, dtype = info
            if length <= _SMALL_VECTOR:
                return struct.unpack_from(f"<{length}{st.format[-1]}", buf, target + 4)
            return np.frombuffer(buf, dtype=dtype, count=length, offset=target + 4)
        items: list[Table | str] = []
        for i in range(length):
            a = target + 4 + 4 * i
            item = a + _U32.unpack_from(buf, a)[0]
            if kind == _VEC_TABLE:
                items.append(Table(buf, item, extra, self.layout))
            else:
                n = _U32.unpack_from(buf, item)[0]
                items.append(bytes(buf[item + 4 : item + 4 + n]).decode("utf-8", errors="replace"))
        return items

    def vector_span(self, name: str) -> tuple[int, int] | None:
        """(byte offset of the first element, element count) of a vector field, or None."""
        off = self._offset(self.spec[name][0])
        if off == 0:
            return None
        at = self.pos + off
        target = at + _U32.unpack_from(self.buf, at)[0]
        return target + 4, _U32.unpack_from(self.buf, target)[0]

    def to_dict(self) -> dict:
        """Every scalar, scalar-vector and string field (used for operator options)."""
        out = {}
        for name, (_, kind, _, _, _) in self.spec.items():
            if kind in (_SCALAR_KIND, _VEC_SCALAR, _STRING):
                value = self.get(name)
                if value is None:
                    continue
                out[name] = tuple(value.tolist()) if isinstance(value, np.ndarray) else value
        return out
