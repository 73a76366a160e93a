"""The benchmark scripts keep the report's JSON contract, and the report generator renders it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
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


def quick_run(tmp_path, name: str, *options: str) -> tuple[dict, str]:
    """Runs benchmarks/bench_<name>.py --quick --json: its document, checked against the
    contract, and what it printed."""
    target = tmp_path / f"{name}.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / f"bench_{name}.py"), "--quick", *options, "--json", str(target)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(target.read_text())
    check_contract(doc)
    assert doc["benchmark"] == name and doc["quick"] is True
    return doc, done.stdout


@pytest.mark.slow
def test_overhead_benchmark_quick_run_keeps_the_contract(tmp_path):
    pytest.importorskip("ai_edge_litert")
    doc, printed = quick_run(tmp_path, "overhead")
    cases = [row["case"] for row in doc["rows"]]
    assert any("one ADD" in c for c in cases) and any("face_detection_short_range" in c for c in cases)
    assert any("import edgeinf" in c for c in cases)
    details = doc["details"]
    # The comparison ran on the same model for both contenders and recorded both medians.
    assert details["one_op"]["raw_median_us"] > 0 and details["one_op"]["run_median_us"] > 0
    assert details["import"]["rounds"] == 3
    assert "Model.run vs raw" in printed  # the table is printed too


def test_report_renders_tables_errors_and_quick_marks(tmp_path, monkeypatch):
    tool = load_tool()
    bench_dir = tmp_path / "benchmarks"
    bench_dir.mkdir()
    good = bench_dir / "bench_good.py"
    good.write_text(
        "import json, sys\n"
        "i = sys.argv.index('--json')\n"
        "doc = {'benchmark': 'good', 'title': 'A | B', 'date': 'D', 'machine': {'cpu': 'C', 'arch': 'x', 'isa': 'i',"
        " 'cores_usable': 2}, 'versions': {'numpy': '2'}, 'rows': [{'case': 'a', 'ratio': 1.23456, 'met': False}],"
        " 'tables': [{'title': 'Bounds', 'rows': [{'case': 'a', 'ceiling': 2}]}, {'title': 'Empty', 'rows': []}]}\n"
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
    assert "Bounds:\n\n| case | ceiling |\n|---|---|\n| a | 2 |" in text and "Empty" not in text
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


def load_bench_power():
    spec = importlib.util.spec_from_file_location("bench_power", REPO / "benchmarks" / "bench_power.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic_simulation(traces, controllers, seeds: int) -> dict:
    """A `part_simulation`-shaped result with seeded random metrics, some not applicable (None, NaN)."""
    rng = np.random.default_rng(7)
    simulation = {}
    for kind in traces:
        per_controller = {}
        for name in controllers:
            runs = []
            for seed in range(seeds):
                runs.append(
                    {
                        "controller": name,
                        "trace": kind,
                        "seed": 100 + seed,
                        "throughput_per_s": float(rng.uniform(50, 400)),
                        "vs_best_static": float(rng.uniform(0.4, 2.0)),
                        "vs_clairvoyant": float(rng.uniform(0.4, 1.8)),
                        "violation_fraction": float(rng.uniform(0, 1)),
                        "energy_above_budget_fraction": float(rng.uniform(0, 0.5)),
                        # Settling and overshoot exist only on traces with a budget step.
                        "settling_periods": int(rng.integers(0, 60)) if kind == "step_down" else None,
                        "overshoot": float(rng.uniform(0, 1)) if kind == "step_down" else None,
                        "mean_power_w": float(rng.uniform(2, 6)),
                        "drop_fraction": float(rng.uniform(0, 0.8)),
                        "latency_p99_ms": float(rng.uniform(10, 100)),
                        # A seed that served nothing has no energy per inference.
                        "energy_per_inference_mj": float("nan") if seed == 0 else float(rng.uniform(10, 40)),
                        "controller_seconds": float(rng.uniform(0.001, 2.0)),
                        "max_temp_c": float(rng.uniform(40, 80)),
                        "throttled_fraction": float(rng.uniform(0, 0.1)),
                    }
                )
            per_controller[name] = runs
        simulation[kind] = {"rows": per_controller, "bounds": [], "compare_wall_s": [1.0] * seeds}
    return simulation


def test_power_rows_are_one_per_trace_and_controller_with_medians_and_worst_seeds():
    bench_power = load_bench_power()
    traces, controllers, seeds, steps = ("steady", "step_down"), ("scheduler", "static-max", "hysteresis"), 5, 1440
    simulation = synthetic_simulation(traces, controllers, seeds)
    rows = bench_power.simulation_rows(simulation, steps_per_run=steps)

    assert [(r["trace"], r["controller"]) for r in rows] == [(t, c) for t in traces for c in controllers]
    for i, row in enumerate(rows):
        assert list(row) == list(bench_power.COLUMNS), f"row {i} columns {list(row)}"
        assert all(not isinstance(v, (dict, list)) for v in row.values()), f"row {i} is not flat: {row}"
    check_contract({"benchmark": "power", "title": "t", "date": "d", "machine": {}, "versions": {}, "rows": rows})

    for row in rows:
        runs = simulation[row["trace"]]["rows"][row["controller"]]

        def values(key, runs=runs):
            return np.array([r[key] for r in runs], dtype=float)

        expected = {
            "seeds": seeds,
            "throughput_per_s": np.median(values("throughput_per_s")),
            "vs_best_static_worst": values("vs_best_static").min(),
            "vs_clairvoyant_worst": values("vs_clairvoyant").min(),
            "violation_fraction_worst": values("violation_fraction").max(),
            "energy_above_budget_fraction_worst": values("energy_above_budget_fraction").max(),
            "mean_power_w": np.median(values("mean_power_w")),
            "drop_fraction": np.median(values("drop_fraction")),
            "latency_p99_ms": np.median(values("latency_p99_ms")),
            "energy_per_inference_mj": np.nanmedian(values("energy_per_inference_mj")),
            "controller_us_per_step": np.median(values("controller_seconds")) / steps * 1e6,
        }
        if row["trace"] == "step_down":
            expected["settling_periods_worst"] = values("settling_periods").max()
            expected["overshoot_worst"] = values("overshoot").max()
        else:
            expected["settling_periods_worst"] = expected["overshoot_worst"] = None
        for key, want in expected.items():
            got = row[key]
            where = f"{row['trace']}/{row['controller']} {key}: got {got}, expected {want}"
            if want is None:
                assert got is None, where
            else:
                assert got == pytest.approx(float(want), rel=1e-12), where


def test_power_rows_of_the_decision_cost_and_the_real_run_share_the_columns():
    bench_power = load_bench_power()
    overhead = {"wall": {"decision": {"median_us": 36.5}}}
    real = {
        "phases": [{"budget_w": 2.0}, {"budget_w": 1.72}],
        "report": {
            "duration_s": 8.0,
            "served": 200,
            "dropped": 40,
            "violation_fraction": 0.125,
            "mean_power_w": 1.74,
            "latency_p99_ms": 12.1,
        },
    }
    decision, run = bench_power.overhead_row(overhead), bench_power.real_row(real)
    assert list(decision) == list(run) == list(bench_power.COLUMNS)
    assert decision["controller_us_per_step"] == 36.5 and decision["throughput_per_s"] is None
    assert "budget 2 then 1.72 W" in run["trace"]
    assert run["throughput_per_s"] == pytest.approx(200 / 8.0)
    assert run["drop_fraction"] == pytest.approx(40 / 240)
    assert run["violation_fraction_worst"] == 0.125 and run["vs_best_static_worst"] is None
    with pytest.raises(ValueError, match="not in COLUMNS"):
        bench_power.report_row(trace="x", throughput=1.0)


@pytest.mark.slow
def test_power_benchmark_quick_run_keeps_the_contract(tmp_path):
    doc, printed = quick_run(tmp_path, "power", "--no-real")
    assert doc["settings"] == {"seeds": 1, "duration_s": 300.0, "step_s": 0.25}
    simulation = doc["simulation"]
    pairs = [(r["trace"], r["controller"]) for r in doc["rows"]]
    expected_pairs = [(t, c) for t, data in simulation.items() for c in data["rows"]]
    n = len(expected_pairs)
    assert n == 5 * len(simulation) and len(simulation) >= 7  # every trace, the thermal ones included
    assert pairs[:n] == expected_pairs
    assert pairs[n:] == [("decision alone (32 configurations)", "scheduler")]
    # With one seed the median and the worst seed are that seed's own figures.
    for row in doc["rows"][:n]:
        (run,) = simulation[row["trace"]]["rows"][row["controller"]]
        assert row["seeds"] == 1
        assert row["throughput_per_s"] == run["throughput_per_s"], f"{row['trace']}/{row['controller']}"
        assert row["vs_best_static_worst"] == run["vs_best_static"], f"{row['trace']}/{row['controller']}"
        assert row["violation_fraction_worst"] == run["violation_fraction"], f"{row['trace']}/{row['controller']}"
    assert doc["rows"][n]["controller_us_per_step"] == doc["overhead"]["wall"]["decision"]["median_us"]
    assert "vs best" in printed and "decision" in printed  # the table is printed too
