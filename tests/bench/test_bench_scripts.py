"""The benchmark scripts keep the report's JSON contract, and the report generator renders it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_tool():
    spec = importlib.util.spec_from_file_location("bench_report", REPO / "tools" / "bench_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_contract(doc: dict) -> None:
    assert {"benchmark", "title", "date", "machine", "versions", "rows"} <= set(doc)
    assert doc["rows"], "a benchmark reports at least one row"
    keys = list(doc["rows"][0])
    for row in doc["rows"]:
        assert list(row) == keys, f"rows differ in columns: {list(row)} vs {keys}"
        assert all(not isinstance(v, (dict, list)) for v in row.values()), f"row is not flat: {row}"


@pytest.mark.slow
def test_overhead_benchmark_quick_run_keeps_the_contract(tmp_path):
    target = tmp_path / "overhead.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_overhead.py"), "--quick", "--json", str(target)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(target.read_text())
    check_contract(doc)
    assert doc["benchmark"] == "overhead" and doc["quick"] is True
    cases = [row["case"] for row in doc["rows"]]
    assert any("one ADD" in c for c in cases) and any("face_detection_short_range" in c for c in cases)
    assert any("import edgeinf" in c for c in cases)
    details = doc["details"]
    # The comparison ran on the same model for both contenders and recorded both medians.
    assert details["one_op"]["raw_median_us"] > 0 and details["one_op"]["run_median_us"] > 0
    assert details["import"]["rounds"] == 3
    assert "Model.run vs raw" in done.stdout  # the table is printed too


def test_report_renders_tables_errors_and_quick_marks(tmp_path, monkeypatch):
    tool = load_tool()
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    good = bench_dir / "bench_good.py"
    good.write_text(
        "import json, sys\n"
        "i = sys.argv.index('--json')\n"
        "doc = {'benchmark': 'good', 'title': 'A | B', 'date': 'D', 'machine': {'cpu': 'C', 'arch': 'x', 'isa': 'i',"
        " 'cores_usable': 2}, 'versions': {'numpy': '2'}, 'rows': [{'case': 'a', 'ratio': 1.23456, 'met': False}]}\n"
        "open(sys.argv[i + 1], 'w').write(json.dumps(doc))\n"
    )
    (bench_dir / "bench_broken.py").write_text("raise SystemExit('cannot measure here')\n")
    monkeypatch.setattr(tool, "BENCHMARKS", bench_dir)
    monkeypatch.setattr(tool, "RESULTS", bench_dir / "results")
    out = tmp_path / "README.md"
    assert tool.main(["--out", str(out)]) == 0
    text = out.read_text()
    assert "## good: A | B" in text
    assert "| case | ratio | met |" in text and "| a | 1.235 | **no** |" in text
    assert "Measured D on C (x, i, 2 usable cores); numpy 2." in text
    assert "## broken" in text and "No figures: exit status 1: cannot measure here" in text
    assert json.loads((bench_dir / "results" / "good.json").read_text())["rows"][0]["case"] == "a"
    # A partial run keeps the last figures of the benchmarks it did not run.
    (bench_dir / "bench_good.py").write_text("raise SystemExit(3)\n")
    assert tool.main(["--out", str(out), "--only", "broken"]) == 0
    assert "| a | 1.235 | **no** |" in out.read_text()
    assert tool.main(["--out", str(out), "--only", "nonexistent"]) == 2


def test_report_lists_figures_of_a_benchmark_without_rows():
    tool = load_tool()
    doc = {
        "benchmark": "nested",
        "meta": {"date": "2026-01-02", "versions": {"numpy": "2.4"}},
        "cases": {"bgr": {"median_us": 78.5, "runs": [1, 2, 3]}},
    }
    text = tool.render([doc])
    assert "its figures are listed as they are" in text
    assert "| cases.bgr.median_us | 78.5 |" in text and "| cases.bgr.runs | 1, 2, 3 |" in text
    assert "Measured 2026-01-02 on" in text and "numpy 2.4" in text


def test_report_finds_context_in_env_or_meta_and_names_untitled_benchmarks(tmp_path, monkeypatch):
    tool = load_tool()
    bench_dir = tmp_path / "benchmarks"
    (bench_dir / "results").mkdir(parents=True)
    (bench_dir / "bench_old.py").write_text('"""Old style: its own JSON layout.\n\nMore."""\n')
    doc = {"rows": [{"model": "m", "check_warm": [0.5, 0.25]}], "env": {"numpy": "2.4", "date": "D", "machine": "x"}}
    (bench_dir / "results" / "old.json").write_text(json.dumps(doc))
    monkeypatch.setattr(tool, "BENCHMARKS", bench_dir)
    monkeypatch.setattr(tool, "RESULTS", bench_dir / "results")
    out = tmp_path / "README.md"
    assert tool.main(["--out", str(out), "--from", str(bench_dir / "results")]) == 0
    text = out.read_text()
    assert "## old: Old style: its own JSON layout." in text
    assert "Measured D on x (x); numpy 2.4." in text
    assert "| m | 0.5, 0.25 |" in text
