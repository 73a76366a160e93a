"""`edgeinf.metrics.render()` against the Prometheus text exposition format, parsed back two ways."""

from __future__ import annotations

import math
import re
import shutil
import urllib.error
import urllib.request

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import edgeinf
from edgeinf import metrics

# The format's grammar for one sample line: name, optional {labels}, value (no timestamps here).
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\\\|\\"|\\n)*"'
SAMPLE = re.compile(rf"^({_NAME})(\{{{_LABEL}(?:,{_LABEL})*\}})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], value)


def parse_strict(text: str) -> dict:
    """Line-level parse that enforces HELP then TYPE before a family's samples."""
    assert text.endswith("\n"), "exposition must end with a line feed"
    families: dict[str, dict] = {}
    current = None
    for n, line in enumerate(text.splitlines()):
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in families, f"line {n}: family {name} declared twice"
            current = families[name] = {"help": line.split(" ", 3)[3], "type": None, "samples": []}
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert current is families.get(name), f"line {n}: TYPE {name} not right after its HELP"
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), f"line {n}: type {kind}"
            current["type"] = kind
            continue
        match = SAMPLE.match(line)
        assert match, f"line {n} is not a valid sample: {line!r}"
        name, labels, value = match.groups()
        assert current is not None and current["type"], f"line {n}: sample before HELP/TYPE"
        base = families_key(name, current)
        assert base, f"line {n}: sample {name} outside its family"
        parsed_labels = {k: unescape(v) for k, v in LABEL.findall(labels or "")}
        current["samples"].append((name, parsed_labels, float(value)))
    return families


def families_key(name: str, family: dict) -> bool:
    suffixes = ("_bucket", "_sum", "_count") if family["type"] == "histogram" else ("",)
    return any(name.endswith(s) for s in suffixes)


@pytest.fixture
def two_models(model_path, tmp_path, rng):
    # A file name with a quote, a backslash and a line feed: every label escape is exercised.
    odd = tmp_path / 'face "short"\\range\nv1.tflite'
    shutil.copy(model_path("face_detection_short_range"), odd)
    a = edgeinf.load(model_path("face_detection_short_range"), num_threads=1, check=False)
    b = edgeinf.load(odd, num_threads=1, check=False)
    x = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    for _ in range(7):
        a.run(x)
    for _ in range(3):
        b.run(x)
    with pytest.raises(edgeinf.InputError):
        b.run(x[:, :64])
    yield a, b
    a.close()
    b.close()


def test_render_parses_with_the_reference_parser(two_models):
    a, b = two_models
    text = metrics.render([a, b])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["edgeinf_model_latency_seconds"].type == "histogram"
    assert families["edgeinf_model_calls"].type == "counter"  # the parser strips _total
    calls = {s.labels["model"]: s.value for s in families["edgeinf_model_calls"].samples}
    assert calls == {a.path.name: 7, b.path.name: 3}
    errors = {s.labels["model"]: s.value for s in families["edgeinf_model_errors"].samples}
    assert errors == {a.path.name: 0, b.path.name: 1}
    for model in (a, b):
        snap = model.metrics.snapshot()
        samples = [s for s in families["edgeinf_model_latency_seconds"].samples if s.labels["model"] == model.path.name]
        count = next(s.value for s in samples if s.name.endswith("_count"))
        total = next(s.value for s in samples if s.name.endswith("_sum"))
        assert count == snap.calls
        assert total == pytest.approx(snap.sum_s)


def test_render_follows_the_format_line_by_line(two_models):
    a, b = two_models
    families = parse_strict(metrics.render([a, b]))
    assert b.path.name in {s[1]["model"] for s in families["edgeinf_model_calls_total"]["samples"]}
    hist = families["edgeinf_model_latency_seconds"]
    for model in (a, b):
        labels = model.metrics.labels()
        mine = [s for s in hist["samples"] if s[1]["instance"] == labels["instance"]]
        buckets = [s for s in mine if s[0].endswith("_bucket")]
        bounds = [float(s[1]["le"]) for s in buckets]
        counts = [s[2] for s in buckets]
        assert bounds == [*metrics.LATENCY_BUCKETS_S, math.inf]
        assert all(x <= y for x, y in zip(counts, counts[1:])), f"buckets not cumulative: {counts}"
        count = next(s[2] for s in mine if s[0].endswith("_count"))
        assert counts[-1] == count == model.metrics.snapshot().calls
        # The cumulative counts are the running sums of the model's own bucket counts.
        np.testing.assert_array_equal(counts, np.cumsum(model.metrics.snapshot().buckets))
    stages = families["edgeinf_model_stage_seconds_total"]
    assert {s[1]["stage"] for s in stages["samples"]} == {"preprocess", "inference", "postprocess"}
    quantiles = families["edgeinf_model_latency_quantile_seconds"]
    for s in quantiles["samples"]:
        model = a if s[1]["instance"] == a.metrics.labels()["instance"] else b
        assert s[2] == pytest.approx(model.metrics.snapshot().quantile(float(s[1]["quantile"])))


def test_label_and_help_escaping():
    assert metrics.escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert metrics.escape_help("x\\y\nz") == "x\\\\y\\nz"
    assert metrics.format_value(float("nan")) == "NaN"
    assert metrics.format_value(float("inf")) == "+Inf"
    assert metrics.format_value(3) == "3"


def test_a_model_without_calls_renders_nan_quantiles(model_path):
    with edgeinf.load(model_path("face_detection_short_range"), num_threads=1, check=False) as model:
        families = {f.name: f for f in text_string_to_metric_families(metrics.render([model]))}
    values = [s.value for s in families["edgeinf_model_latency_quantile_seconds"].samples]
    assert len(values) == 3 and all(math.isnan(v) for v in values)


def test_exporter_serves_render_on_localhost(two_models):
    a, _ = two_models
    with metrics.serve(port=0) as exporter:
        assert exporter.host == "127.0.0.1" and exporter.port > 0
        with urllib.request.urlopen(exporter.url, timeout=5) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = response.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(body)}
        calls = {s.labels["instance"]: s.value for s in families["edgeinf_model_calls"].samples}
        assert calls[a.metrics.labels()["instance"]] == 7
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/other", timeout=5)
        assert err.value.code == 404
    with pytest.raises(OSError):
        urllib.request.urlopen(exporter.url, timeout=2)  # closed: the port no longer answers


def test_metrics_and_abtest_are_reachable_from_a_bare_import():
    import subprocess
    import sys

    code = (
        "import sys, edgeinf\n"
        "assert 'edgeinf.metrics' not in sys.modules and 'edgeinf.model' not in sys.modules\n"
        "assert edgeinf.metrics.render() == '\\n' or edgeinf.metrics.render().startswith('# HELP')\n"
        "print(edgeinf.ABTest.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ABTest"


class Collector:
    """A registered collector yielding one gauge family labelled with its own name."""

    def __init__(self, name: str, value: float, kind: str = "gauge"):
        self.name, self.value, self.kind = name, value, kind

    def prometheus_families(self):
        family = metrics.Family("edgeinf_test_collector_value", self.kind, "A test figure.", [])
        family.samples.append(("", {"collector": self.name}, self.value))
        return [family]


def test_collectors_of_one_kind_render_as_one_family():
    first, second = Collector("first", 1.0), Collector("second", 2.0)
    metrics.register_collector(first)
    metrics.register_collector(second)
    families = parse_strict(metrics.render())  # fails on a family declared twice
    samples = {s[1]["collector"]: s[2] for s in families["edgeinf_test_collector_value"]["samples"]}
    assert samples == {"first": 1.0, "second": 2.0}
    parsed = [f for f in text_string_to_metric_families(metrics.render()) if f.name == "edgeinf_test_collector_value"]
    assert len(parsed) == 1 and len(parsed[0].samples) == 2


def test_collectors_that_disagree_on_a_type_are_refused():
    same_name = [Collector("a", 1.0).prometheus_families()[0], Collector("b", 1.0, "counter").prometheus_families()[0]]
    with pytest.raises(ValueError, match="both a gauge and a counter"):
        metrics.merge_families(same_name)
