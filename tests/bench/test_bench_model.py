"""`edgeinf bench`: the method on real models, its JSON schema, CSV, plot, progress and memory figures."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from edgeinf import bench, cli
from edgeinf.bench.cli import CSV_COLUMNS, ProgressBar

FACE = "face_detection_short_range"


class FakeClock:
    """perf_counter stand-in: time moves only when the measured function says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_measure_reports_known_synthetic_timings(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    durations = iter([5e-6] * 3 + [k * 1e-6 for k in range(100, 0, -1)])  # 3 warm-ups, then 100..1 us

    def fn():
        clock.now += next(durations)

    stats = bench.measure(fn, warmup=3, runs=100)
    expected = np.arange(1, 101, dtype=float)
    assert stats.median_us == pytest.approx(np.percentile(expected, 50))
    assert stats.p95_us == pytest.approx(np.percentile(expected, 95))
    assert stats.p99_us == pytest.approx(np.percentile(expected, 99))
    assert (stats.max_us, stats.min_us) == pytest.approx((100.0, 1.0))
    assert stats.mean_us == pytest.approx(50.5)
    np.testing.assert_allclose(np.sort(stats.samples_us), expected)


def test_measure_divides_batches_by_their_size(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bench.time, "perf_counter", clock)

    def fn():
        clock.now += 2e-6

    stats = bench.measure(fn, warmup=0, runs=10, batch=50)
    assert stats.batch == 50 and stats.median_us == pytest.approx(2.0) and stats.max_us == pytest.approx(2.0)


def test_compare_takes_its_clock_as_a_parameter():
    clock = FakeClock()

    def slow():
        clock.now += 30e-6

    def fast():
        clock.now += 10e-6

    out = bench.compare({"slow": slow, "fast": fast}, warmup=1, runs=8, rounds=4, clock=clock)
    assert out["slow"].median_us == pytest.approx(30.0) and out["fast"].median_us == pytest.approx(10.0)
    assert out["slow"].runs == 8


def test_peak_rss_resets_and_sees_a_known_allocation():
    if not bench.reset_peak_rss():
        pytest.fail("this Linux kernel should allow resetting the peak RSS via /proc/self/clear_refs")
    before = bench.peak_rss_bytes()
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, every page touched
    during = bench.peak_rss_bytes()
    assert bench.rss_bytes() - before > 60 * 2**20
    del block
    assert during - before > 60 * 2**20
    after = bench.peak_rss_bytes()
    assert after - before > 60 * 2**20  # the peak stays after the memory is freed
    assert bench.rss_bytes() < after - 60 * 2**20
    bench.reset_peak_rss()
    assert bench.peak_rss_bytes() < during


def test_random_inputs_follow_the_specs_and_the_seed():
    from edgeinf.types import TensorSpec

    specs = (TensorSpec("a", (1, 4, 4, 3), np.dtype(np.float32)), TensorSpec("b", (2, 5), np.dtype(np.int8)))
    a1, b1 = bench.random_inputs(specs, seed=3)
    a2, b2 = bench.random_inputs(specs, seed=3)
    assert a1.shape == (1, 4, 4, 3) and a1.dtype == np.float32 and a1.min() >= -1 and a1.max() <= 1
    assert b1.shape == (2, 5) and b1.dtype == np.int8
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    with pytest.raises(ValueError, match="dynamic dimensions"):
        bench.random_inputs((TensorSpec("d", (1, -1), np.dtype(np.float32)),))


def test_image_input_matches_a_hand_made_conversion(model_path):
    from PIL import Image

    from edgeinf.types import Layout, Quantization, TensorSpec

    photo = model_path("grace_hopper")
    pixels = np.asarray(Image.open(photo).convert("RGB").resize((32, 24), Image.BILINEAR), dtype=np.float32)
    nhwc = bench.image_input(TensorSpec("i", (1, 24, 32, 3), np.dtype(np.float32), Layout.NHWC), photo, "-1,1")
    np.testing.assert_allclose(nhwc[0], pixels / 255 * 2 - 1, rtol=0, atol=1e-6)
    nchw = bench.image_input(TensorSpec("i", (1, 3, 24, 32), np.dtype(np.float32), Layout.NCHW), photo, "0,255")
    np.testing.assert_allclose(nchw[0], pixels.transpose(2, 0, 1), rtol=0, atol=1e-4)
    q = Quantization(scales=(1 / 255,), zero_points=(-128,))
    int8 = bench.image_input(TensorSpec("i", (1, 24, 32, 3), np.dtype(np.int8), Layout.NHWC, q), photo, "0,1")
    np.testing.assert_array_equal(int8[0], np.clip(np.round(pixels - 128), -128, 127).astype(np.int8))
    with pytest.raises(ValueError, match="value_range must be one of"):
        bench.image_input(TensorSpec("i", (1, 24, 32, 3), np.dtype(np.float32), Layout.NHWC), photo, "0,2")


def test_bench_model_record(model_path):
    record = bench.bench_model(model_path(FACE), runs=12, warmup=2, check=False)
    assert record["variant"] == "tflite" and record["delegate"] == "xnnpack" and record["threads"] == 1
    lat = record["latency_us"]
    assert len(lat["samples"]) == 12
    assert lat["median_us"] == pytest.approx(np.percentile(lat["samples"], 50))
    assert lat["min_us"] <= lat["median_us"] <= lat["p95_us"] <= lat["p99_us"] <= lat["max_us"]
    mem = record["memory"]
    # The peak is reset before loading, so it is at least every RSS sampled after that.
    samples = [mem[k] for k in ("rss_after_load_bytes", "rss_after_warmup_bytes", "rss_after_runs_bytes")]
    assert mem["peak_rss_bytes"] >= max(samples) and mem["peak_is_per_run"]
    assert mem["growth_bytes"] == mem["rss_after_runs_bytes"] - mem["rss_after_warmup_bytes"]
    assert record["load_ms"] > 0 and record["first_inference_ms"] > 0


def test_concurrency_pools_every_threads_calls(model_path):
    record = bench.bench_model(model_path(FACE), runs=6, warmup=1, concurrency=3, check=False)
    assert record["concurrency"] == 3 and len(record["latency_us"]["samples"]) == 18
    # Throughput is all 18 calls over the wall time; each thread's 6 calls run one after another inside
    # that wall time, so it can never beat three threads' worth of back-to-back calls.
    total_s = sum(record["latency_us"]["samples"]) / 1e6
    assert 0 < record["throughput_per_s"] <= 18 / (total_s / 3) * 1.0001


def test_bench_model_rejects_bad_configurations(model_path):
    with pytest.raises(ValueError, match="unknown backend variant"):
        bench.bench_model(model_path(FACE), variant="tensorrt", check=False)
    with pytest.raises(ValueError, match="threads and concurrency must be >= 1"):
        bench.bench_model(model_path(FACE), concurrency=0, check=False)


# -- the command -------------------------------------------------------------------------------

RESULT_SCHEMA = {
    "model": str,
    "model_name": str,
    "variant": str,
    "backend": str,
    "runtime": str,
    "delegate": (str, type(None)),
    "threads": int,
    "concurrency": int,
    "input": str,
    "input_dtype": str,
    "input_shape": list,
    "warmup": int,
    "runs": int,
    "load_ms": float,
    "first_inference_ms": float,
    "latency_us": dict,
    "throughput_per_s": float,
    "memory": dict,
}
LATENCY_KEYS = {"median_us", "p95_us", "p99_us", "max_us", "min_us", "mean_us", "samples"}
MEMORY_KEYS = {
    "rss_before_load_bytes",
    "rss_after_load_bytes",
    "rss_after_warmup_bytes",
    "rss_after_runs_bytes",
    "peak_rss_bytes",
    "growth_bytes",
    "peak_is_per_run",
}


def check_schema(doc: dict) -> None:
    assert doc["schema"] == bench.SCHEMA
    assert set(doc) == {"schema", "date", "machine", "versions", "config", "results", "skipped"}
    assert {"arch", "cpu", "cores_usable", "isa", "os", "load_avg_1m"} <= set(doc["machine"])
    assert {"edgeinf", "python", "numpy", "ai-edge-litert"} <= set(doc["versions"])
    for r in doc["results"]:
        assert set(r) == set(RESULT_SCHEMA), f"keys differ: {set(r) ^ set(RESULT_SCHEMA)}"
        for key, kind in RESULT_SCHEMA.items():
            assert isinstance(r[key], kind), f"{key}: expected {kind}, got {type(r[key]).__name__}"
        assert set(r["latency_us"]) == LATENCY_KEYS
        assert set(r["memory"]) == MEMORY_KEYS
        assert len(r["latency_us"]["samples"]) == r["runs"] * r["concurrency"]
    for s in doc["skipped"]:
        assert set(s) == {"model", "variant", "reason"}


def test_json_sweep_of_threads_and_backends(capsys, model_path):
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("ncnn")
    code = cli.main(
        [
            "bench",
            FACE,
            "--runs",
            "5",
            "--warmup",
            "1",
            "--threads",
            "1,2",
            "--backend",
            "tflite,tflite-builtin,ncnn",
            "--no-check",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out)
    check_schema(doc)
    got = sorted((r["variant"], r["threads"]) for r in doc["results"])
    assert got == [("tflite", 1), ("tflite", 2), ("tflite-builtin", 1), ("tflite-builtin", 2)]
    delegates = {r["variant"]: r["delegate"] for r in doc["results"]}
    assert delegates == {"tflite": "xnnpack", "tflite-builtin": None}
    assert [s["variant"] for s in doc["skipped"]] == ["ncnn"]
    assert "does not run .tflite files" in doc["skipped"][0]["reason"]


def test_float_and_int8_variants_side_by_side(tmp_path, capsys):
    from edgeinf.formats.tflite_writer import OpDef, TensorDef, build_model

    bias = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 64)
    (tmp_path / "add_f32.tflite").write_bytes(
        build_model(
            [TensorDef("x", (1, 64), "float32"), TensorDef("b", (1, 64), "float32", data=bias)]
            + [TensorDef("y", (1, 64), "float32")],
            [OpDef("ADD", [0, 1], [2])],
            inputs=[0],
            outputs=[2],
        )
    )
    q = {"scale": 1 / 64, "zero_point": 0}
    (tmp_path / "add_int8.tflite").write_bytes(
        build_model(
            [
                TensorDef("x", (1, 64), "int8", **q),
                TensorDef("b", (1, 64), "int8", data=np.round(bias * 64).astype(np.int8), **q),
            ]
            + [TensorDef("y", (1, 64), "int8", scale=1 / 32, zero_point=0)],
            [OpDef("ADD", [0, 1], [2])],
            inputs=[0],
            outputs=[2],
        )
    )
    models = [str(tmp_path / "add_f32.tflite"), str(tmp_path / "add_int8.tflite")]
    assert cli.main(["bench", *models, "--runs", "5", "--warmup", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    check_schema(doc)
    assert [(r["model_name"], r["input_dtype"]) for r in doc["results"]] == [
        ("add_f32.tflite", "float32"),
        ("add_int8.tflite", "int8"),
    ]


def test_ncnn_variants_on_a_dynamic_input_with_a_given_shape(capsys):
    pytest.importorskip("ncnn")
    code = cli.main(
        ["bench", "realesr_animevideov3_x2", "--runs", "3", "--warmup", "1", "--backend", "ncnn,ncnn-fp32"]
        + ["--shape", "1,3,32,32", "--no-check", "--json"]
    )
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    check_schema(doc)
    assert [(r["variant"], r["backend"], r["input_shape"]) for r in doc["results"]] == [
        ("ncnn", "ncnn", [1, 3, 32, 32]),
        ("ncnn-fp32", "ncnn", [1, 3, 32, 32]),
    ]
    code = cli.main(["bench", "realesr_animevideov3_x2", "--runs", "2", "--no-check", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and "give a shape (--shape)" in doc["skipped"][0]["reason"]


def test_csv_file_and_table(capsys, tmp_path, model_path):
    pytest.importorskip("ai_edge_litert")
    target = tmp_path / "out.csv"
    code = cli.main(
        ["bench", str(model_path(FACE)), "--runs", "4", "--warmup", "0", "--no-check", "--csv", str(target)]
    )
    table = capsys.readouterr().out
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert list(rows[0]) == list(CSV_COLUMNS) and len(rows) == 1
    assert rows[0]["variant"] == "tflite" and float(rows[0]["median_us"]) > 0
    median_ms = float(rows[0]["median_us"]) / 1e3
    assert f"{median_ms:.3f}" in table  # the table is printed when stdout is free
    assert "ai-edge-litert 2.3.0" in table or "ai-edge-litert" in table


def test_plot_writes_a_png(tmp_path, model_path, capsys):
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("matplotlib", reason="the plot extra")
    target = tmp_path / "bench.png"
    code = cli.main(
        ["bench", FACE, "--runs", "4", "--warmup", "0", "--threads", "1,2", "--no-check", "--plot", str(target)]
    )
    assert code == 0
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_plot_without_matplotlib_is_a_clear_error(tmp_path, model_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code = cli.main(["bench", FACE, "--runs", "2", "--warmup", "0", "--no-check", "--plot", str(tmp_path / "x.png")])
    assert code == 2
    assert "pip install 'edgeinf[plot]'" in capsys.readouterr().err


def test_bad_arguments_are_refused(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", FACE, "--threads", "1,zero"])
    assert "comma-separated integers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["bench", FACE, "--backend", "tensorrt"])
    assert "unknown backend variant 'tensorrt'" in capsys.readouterr().err
    assert cli.main(["bench", FACE, "--json", "--csv"]) == 2
    assert "cannot both go to stdout" in capsys.readouterr().err


def test_a_model_that_fails_to_load_is_reported_not_fatal(tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    broken = tmp_path / "broken.tflite"
    broken.write_bytes(b"\0\0\0\0TFL3" + b"\0" * 8)
    code = cli.main(["bench", str(broken), "--runs", "2", "--no-check", "--json"])
    captured = capsys.readouterr()
    assert code == 2  # nothing could be measured
    doc = json.loads(captured.out)
    assert doc["results"] == [] and "ModelFileError" in doc["skipped"][0]["reason"]
    assert "broken.tflite on tflite" in captured.err


def test_progress_bar_draws_on_its_stream():
    stream = io.StringIO()
    bar = ProgressBar(stream, enabled=True, width=10)
    bar.start("m tflite", 4)
    for i in range(1, 5):
        bar.update(i)
    bar.finish()
    text = stream.getvalue()
    assert "\rm tflite [----------] 0/4" in text
    assert text.endswith("\rm tflite [##########] 4/4\n")
    quiet = io.StringIO()
    off = ProgressBar(quiet, enabled=False)
    off.start("x", 3)
    off.update(3)
    off.finish()
    assert quiet.getvalue() == ""


def test_cpu_model_names_the_x86_family_and_keeps_a_pis_hardware_line(tmp_path):
    x86 = tmp_path / "x86"
    block = "processor\t: {}\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n\n"
    x86.write_text(block.format(0) + block.format(1))
    assert bench.cpu_model(x86) == "AMD EPYC (family 23, model 1)"
    pi = tmp_path / "pi"
    pi.write_text(
        "processor\t: 0\nBogoMIPS\t: 108.00\nCPU part\t: 0xd08\n\n"
        "Hardware\t: BCM2835\nRevision\t: c03114\nModel\t\t: Raspberry Pi 4 Model B Rev 1.4\n"
    )
    assert bench.cpu_model(pi) == "BCM2835"


def test_stolen_time_is_the_steal_share_of_all_cpu_time_since_the_start(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 50 0 25 400 5 0 2 18 0 0\n")
    watch = bench.StolenTime(stat)
    assert watch.share() == 0.0  # no time passed
    stat.write_text("cpu  160 0 70 900 10 0 5 95 0 0\ncpu0 80 0 35 450 5 0 2 48 0 0\n")
    assert watch.share() == pytest.approx(60 / 240)
    watch.restart()
    assert watch.share() == 0.0


def test_stolen_time_is_none_without_a_readable_proc_stat(tmp_path):
    assert bench.StolenTime(tmp_path / "missing").share() is None
    garbled = tmp_path / "stat"
    garbled.write_text("intr 1 2 3\n")
    assert bench.StolenTime(garbled).share() is None


def test_a_report_warns_when_the_hypervisor_took_cpu_time(monkeypatch, tmp_path):
    from edgeinf.bench import machine

    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 0 900 0 0 0 0 0 0\n")
    monkeypatch.setattr(machine, "_since_import", machine.StolenTime(stat))
    stat.write_text("cpu  200 0 0 1000 0 0 0 100 0 0\n")
    env = bench.environment()
    assert env["machine"]["cpu_stolen_share"] == pytest.approx(1 / 3, abs=1e-4)
    assert any("33% of this VM's CPU time" in w for w in env["machine"]["conditions"]["warnings"])
    stat.write_text("cpu  300 0 0 2000 0 0 0 100 0 0\n")
    env = bench.environment()
    assert env["machine"]["cpu_stolen_share"] == pytest.approx(100 / 1400, abs=1e-4)
    assert env["machine"]["cpu_stolen_share"] > machine.STOLEN_WARNING_SHARE
    stat.write_text("cpu  5300 0 0 20000 0 0 0 100 0 0\n")
    env = bench.environment()
    assert env["machine"]["cpu_stolen_share"] < machine.STOLEN_WARNING_SHARE
    assert not any("hypervisor" in w for w in env["machine"]["conditions"]["warnings"])
