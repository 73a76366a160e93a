"""edgeinf/_C.pyi describes the native module that is built: the same functions and classes,
the same methods, and the same parameter names where the binding states them."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

_C = pytest.importorskip("edgeinf._C", reason="native module not built")

STUB = Path(__file__).resolve().parents[2] / "edgeinf" / "_C.pyi"


def _stub_names() -> tuple[dict[str, ast.FunctionDef], dict[str, dict[str, ast.FunctionDef]]]:
    tree = ast.parse(STUB.read_text())
    functions, classes = {}, {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            # with the methods of stub-only bases (``class _PreparedLayer``) defined above it
            methods = {}
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id in classes:
                    methods.update(classes[base.id])
            methods.update({n.name: n for n in node.body if isinstance(n, ast.FunctionDef)})
            classes[node.name] = methods
    stub_only = {name for name in classes if name.startswith("_")}  # bases the module does not export
    return functions, {name: methods for name, methods in classes.items() if name not in stub_only}


def _exported() -> tuple[set[str], set[str]]:
    names = [n for n in dir(_C) if not n.startswith("__")]
    classes = {n for n in names if inspect.isclass(getattr(_C, n)) and not issubclass(getattr(_C, n), BaseException)}
    functions = {n for n in names if callable(getattr(_C, n)) and n not in classes}
    functions -= {n for n in functions if isinstance(getattr(_C, n), type)}  # exception classes
    return functions, classes


def test_the_stub_names_every_function_and_class_the_module_exports():
    stub_functions, stub_classes = _stub_names()
    functions, classes = _exported()
    assert sorted(functions - set(stub_functions)) == [], "functions missing from _C.pyi"
    assert sorted(set(stub_functions) - functions) == [], "functions in _C.pyi the module does not have"
    assert sorted(classes - set(stub_classes)) == [], "classes missing from _C.pyi"
    assert sorted(set(stub_classes) - classes) == [], "classes in _C.pyi the module does not have"
    for name, methods in stub_classes.items():
        cls = getattr(_C, name)
        have = {m for m in dir(cls) if not m.startswith("__") or m in ("__init__", "__call__", "__len__")}
        assert sorted(set(methods) - have) == [], f"{name}: methods in _C.pyi the class does not have"
        public = {m for m in have if not m.startswith("__")} - {"_pybind11_conduit_v1_"}
        assert sorted(public - set(methods)) == [], f"{name}: methods or properties missing from _C.pyi"


def _doc_parameters(name: str, obj) -> list[str] | None:
    """Parameter names from pybind11's signature line (``name(a: int, b: float) -> ...``)."""
    doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
    if not doc or not doc[0].startswith(name + "("):
        return None  # a METH_FASTCALL function: no signature line
    inside = doc[0][doc[0].index("(") + 1 : doc[0].rindex(")")]
    names, depth, current = [], 0, ""
    for ch in inside + ",":
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            if current.strip():
                names.append(current.split(":")[0].split("=")[0].strip())
            current = ""
        else:
            current += ch
    return [n for n in names if n not in ("self", "*args", "**kwargs")]


def test_function_parameters_match_the_bindings():
    stub_functions, _ = _stub_names()
    checked = 0
    for name, node in stub_functions.items():
        want = _doc_parameters(name, getattr(_C, name))
        if want is None:
            continue
        got = [a.arg for a in node.args.posonlyargs + node.args.args]
        assert got == want, f"_C.{name}: stub parameters {got}, binding {want}"
        checked += 1
    assert checked > 20
