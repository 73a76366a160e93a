"""The document every benchmark writes: the contract's keys in order, written to a file or stdout."""

from __future__ import annotations

import json

from edgeinf.bench import document, finish, machine_line, write_document


def test_document_puts_the_contract_first_and_the_fields_in_order():
    doc = document("demo", "A demo", quick=True, settings={"runs": 3}, rows=[{"case": "a"}])
    assert list(doc) == ["benchmark", "title", "date", "machine", "versions", "quick", "settings", "rows"]
    assert doc["benchmark"] == "demo" and doc["title"] == "A demo" and doc["rows"] == [{"case": "a"}]
    assert {"cpu", "isa", "arch"} <= set(doc["machine"]) and "edgeinf" in doc["versions"]
    assert machine_line(doc) == f"{doc['date']}  {doc['machine']['cpu']} {doc['machine']['isa']}"


def test_write_document_creates_the_folder_and_ends_with_a_newline(tmp_path):
    doc = document("demo", "A demo", rows=[{"case": "a", "median_us": 1.5}])
    target = tmp_path / "results" / "demo.json"
    write_document(doc, target)
    text = target.read_text()
    assert text.endswith("}\n") and text.startswith('{\n  "benchmark": "demo"')
    assert json.loads(text) == doc


def test_write_document_to_stdout_and_with_a_default(capsys):
    class Config:
        label = "short/xnnpack/1"

    doc = {"benchmark": "demo", "rows": [{"config": Config(), "path": object()}]}
    write_document(doc, "-", default=lambda o: o.label if isinstance(o, Config) else "other")
    assert json.loads(capsys.readouterr().out)["rows"] == [{"config": "short/xnnpack/1", "path": "other"}]


def test_finish_prints_the_table_unless_the_document_goes_to_stdout(tmp_path, capsys):
    doc = document("demo", "A demo", rows=[{"case": "a"}])
    finish(doc, tmp_path / "demo.json", ["case", "a"])
    assert capsys.readouterr().out == f"case\na\n{machine_line(doc)}\n"
    assert json.loads((tmp_path / "demo.json").read_text()) == doc
    finish(doc, None, ["case", "a"])
    assert capsys.readouterr().out == f"case\na\n{machine_line(doc)}\n"
    finish(doc, "-", ["case", "a"])
    assert json.loads(capsys.readouterr().out) == doc
