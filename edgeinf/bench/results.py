"""The JSON document a benchmark of benchmarks/ writes, as tools/bench_report.py reads it.

>>> doc = document("demo", "A demo", quick=True, rows=[{"case": "a", "median_us": 1.0}])
>>> list(doc)[:5], list(doc)[-2:]
(['benchmark', 'title', 'date', 'machine', 'versions'], ['quick', 'rows'])
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from .machine import environment


def document(benchmark: str, title: str, **fields: object) -> dict:
    """``benchmark`` (short name), ``title`` (one line), the `environment` (date, machine,
    versions), then ``fields`` in the order given; ``rows`` among them (flat objects, one per
    line of the report's table, all with the same keys)."""
    return {"benchmark": benchmark, "title": title, **environment(), **fields}


def write_document(doc: dict, target: str | os.PathLike[str], default: Callable[[object], object] | None = str) -> None:
    """Writes ``doc`` as indented JSON and a newline to ``target`` (``-``: stdout), creating
    the target's folder. ``default`` turns what JSON cannot hold into what it can."""
    text = json.dumps(doc, indent=2, default=default) + "\n"
    if str(target) == "-":
        sys.stdout.write(text)
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def machine_line(doc: dict) -> str:
    """When and on what a document's figures were taken, for the end of a printed table."""
    return f"{doc['date']}  {doc['machine']['cpu']} {doc['machine']['isa']}"


def finish(doc: dict, target: str | os.PathLike[str] | None, table: Iterable[str]) -> None:
    """The end of a benchmark that prints its table last: the table's lines and the
    `machine_line` (unless the document itself goes to stdout), then the document to
    ``target`` when one is given."""
    if target is None or str(target) != "-":
        for line in table:
            print(line)
        print(machine_line(doc))
    if target:
        write_document(doc, target)
