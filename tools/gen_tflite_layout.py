"""Generate edgeinf/formats/tflite_layout.json from the TFLite schema module a runtime ships.

ai-edge-litert ships ``schema_py_generated.py``, the flatc output for TFLite's
``schema.fbs``. This tool reads that file's *source* (it imports nothing from the
runtime) and writes, for every table, each field's vtable slot, kind and default,
for every union the table each member names, and every enum. edgeinf's verifier and
reader walk .tflite files with this data, so they need no runtime and no schema
module on the device (tflite-runtime ships none).

Usage:
    python tools/gen_tflite_layout.py [--schema PATH] [--out edgeinf/formats/tflite_layout.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

from table_file import ROOT, write_table

SCALARS = {
    "Bool": ("bool", 1),
    "Int8": ("i8", 1),
    "Uint8": ("u8", 1),
    "Int16": ("i16", 2),
    "Uint16": ("u16", 2),
    "Int32": ("i32", 4),
    "Uint32": ("u32", 4),
    "Int64": ("i64", 8),
    "Uint64": ("u64", 8),
    "Float32": ("f32", 4),
    "Float64": ("f64", 8),
}
_SKIP_SUFFIXES = ("Length", "AsNumpy", "IsNone")
_SKIP_NAMES = {"Init", "GetRootAs"}


def snake(name: str) -> str:
    """CamelCase method name -> the schema's snake_case field name."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def find_schema() -> Path:
    spec = importlib.util.find_spec("ai_edge_litert")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("ai_edge_litert is not installed; pass --schema PATH")
    return Path(next(iter(spec.submodule_search_locations))) / "schema_py_generated.py"


def split_classes(src: str) -> dict[str, str]:
    parts = re.split(r"^class (\w+)\(object\):\n", src, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def parse_enum(body: str) -> dict[str, int] | None:
    own = re.split(r"^\S", body, maxsplit=1, flags=re.M)[0]  # the class body ends at the first unindented line
    lines = [ln.strip() for ln in own.split("\n") if ln.strip() and not ln.strip().startswith("#")]
    values = {}
    for ln in lines:
        m = re.fullmatch(r"(\w+) = (-?\d+)", ln)
        if not m:
            return None
        values[m.group(1)] = int(m.group(2))
    return values or None


def parse_field(name: str, body: str) -> dict | None:
    slot = re.search(r"self\._tab\.Offset\((\d+)\)", body)
    if not slot:
        return None
    field = {"slot": int(slot.group(1)), "method": name}
    obj = re.search(r"obj = (\w+)\(\)", body)
    get = re.search(r"flatbuffers\.number_types\.(\w+)Flags", body.replace("UOffsetTFlags", ""))
    if "self._tab.Union(" in body:
        field["kind"] = "union"
    elif "self._tab.Vector(o)" in body:
        if obj:
            field.update(kind="vector", elem="table", table=obj.group(1))
        elif "self._tab.String(" in body:
            field.update(kind="vector", elem="string")
        else:
            field.update(kind="vector", elem=SCALARS[get.group(1)][0])
    elif obj:
        field.update(kind="table", table=obj.group(1))
    elif "self._tab.String(" in body:
        field["kind"] = "string"
    else:
        field.update(kind="scalar", type=SCALARS[get.group(1)][0])
        ret = re.findall(r"return (.+)\n", body)[-1].strip()
        field["default"] = {"False": False, "True": True}.get(ret)
        if field["default"] is None:
            field["default"] = float(ret) if any(c in ret for c in ".en") else int(ret)
    return field


def parse_table(body: str) -> dict[str, dict]:
    fields = {}
    for m in re.finditer(r"    def (\w+)\(self(?:, j)?\):\n((?:        .*\n|\n)*)", body):
        name = m.group(1)
        if name in _SKIP_NAMES or name.endswith(_SKIP_SUFFIXES):
            continue
        field = parse_field(name, m.group(2))
        if field is not None:
            fields[snake(name)] = field
    return fields


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schema", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "edgeinf/formats/tflite_layout.json")
    args = parser.parse_args(argv)
    schema = args.schema or find_schema()
    src = schema.read_text(encoding="utf-8")
    version = "unknown"
    init = schema.parent / "__init__.py"
    if init.is_file():
        m = re.search(r'__version__ = "([^"]+)"', init.read_text(encoding="utf-8"))
        version = m.group(1) if m else version

    classes = split_classes(src)
    enums, tables = {}, {}
    for cname, body in classes.items():
        if cname.endswith("T") and cname[:-1] in classes:
            continue  # Object API twin of a table
        values = parse_enum(body)
        if values is not None:
            enums[cname] = values
        elif "self._tab = flatbuffers.table.Table" in body:
            tables[cname] = parse_table(body)

    unions = {}
    for m in re.finditer(r"^def (\w+)Creator\(unionType, table\):\n((?:    .*\n)*)", src, flags=re.M):
        members = re.findall(r"if unionType == \w+\.(\w+):\n\s+return (\w+)T\.InitFromBuf", m.group(2))
        unions[m.group(1)] = {str(enums[m.group(1)][member]): table for member, table in members}

    # Which union each union field holds, from the Object API's UnPack: `self.x = UCreator(self.xType, t.X())`.
    for cname, body in classes.items():
        if not (cname.endswith("T") and cname[:-1] in tables):
            continue
        for union, type_attr, method in re.findall(r"= (\w+)Creator\(self\.(\w+), \w+\.(\w+)\(\)\)", body):
            field = tables[cname[:-1]][snake(method)]
            field["union"] = union
            field["type_field"] = snake(type_attr)

    missing = [
        f"{t}.{n}" for t, fs in tables.items() for n, f in fs.items() if f["kind"] == "union" and "union" not in f
    ]
    if missing:
        raise SystemExit(f"union fields without a Creator mapping: {missing}")
    out = {
        "_comment": "Generated by tools/gen_tflite_layout.py from the TFLite schema module; do not edit.",
        "source": f"ai-edge-litert {version} ai_edge_litert/schema_py_generated.py",
        "file_identifier": "TFL3",
        "root_table": "Model",
        "enums": enums,
        "unions": unions,
        "tables": tables,
    }
    write_table(args.out, out, f"{len(tables)} tables, {len(enums)} enums, {len(unions)} unions from {out['source']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
