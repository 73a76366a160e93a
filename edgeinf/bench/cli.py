"""`edgeinf bench MODEL...`: the measuring method over models, backends, threads and concurrency.

Every combination of the given models, backend variants, thread counts and concurrency
levels is one configuration; each is measured with `edgeinf.bench.bench_model` (fixed
input, warm-ups, timed runs, memory). Output: a table (default), ``--json``, ``--csv``,
and ``--plot FILE.png`` (matplotlib, the ``plot`` extra).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import itertools
import json
import math
import sys
import time
from pathlib import Path

from .. import bench, board
from ..errors import EdgeInfError
from ..model import MAX_THREADS

CSV_COLUMNS = (
    "model_name",
    "variant",
    "backend",
    "runtime",
    "delegate",
    "threads",
    "concurrency",
    "input",
    "runs",
    "load_ms",
    "first_inference_ms",
    "median_us",
    "p95_us",
    "p99_us",
    "max_us",
    "min_us",
    "mean_us",
    "throughput_per_s",
    "rss_after_load_bytes",
    "peak_rss_bytes",
    "growth_bytes",
)


MAX_RUNS = 1_000_000
MAX_CONCURRENCY = 64
MAX_SHAPE_ELEMENTS = 1 << 26
"""The largest --shape (64 Mi elements: 256 MB of float32); bigger inputs are a mistake on a board."""


def _int_list(text: str, limit: int = MAX_THREADS) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers like 1,2,4, got {text!r}") from None
    if not values or any(not 1 <= v <= limit for v in values):
        raise argparse.ArgumentTypeError(f"expected integers from 1 to {limit} like 1,2,4, got {text!r}")
    return values


def _concurrency_list(text: str) -> list[int]:
    return _int_list(text, MAX_CONCURRENCY)


def _shape(text: str) -> list[int]:
    dims = _int_list(text, MAX_SHAPE_ELEMENTS)
    if len(dims) > 8 or math.prod(dims) > MAX_SHAPE_ELEMENTS:
        raise argparse.ArgumentTypeError(
            f"expected at most 8 dimensions and {MAX_SHAPE_ELEMENTS} elements, got {text!r}"
        )
    return dims


def _count(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def _variant_list(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n != "auto" and n not in bench.VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown backend variant {unknown[0] if unknown else text!r}: expected 'auto' or any of "
            f"{', '.join(bench.VARIANTS)}"
        )
    return names


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench",
        help="measure models: latency percentiles, throughput, load and first-inference time, memory",
        description=__doc__.split("\n\n")[1],
    )
    p.add_argument("models", nargs="+", metavar="MODEL", help="model files or manifest names (float and int8 variants)")
    p.add_argument("--runs", type=_count(1, MAX_RUNS), default=100, help="timed runs per configuration (default 100)")
    p.add_argument("--warmup", type=_count(0, MAX_RUNS), default=10, help="warm-up runs before timing (default 10)")
    p.add_argument("--threads", type=_int_list, default=[1], help="runtime thread counts to sweep, e.g. 1,2,4")
    p.add_argument(
        "--backend",
        type=_variant_list,
        default=["auto"],
        help=f"backend variants to sweep, comma separated: auto, {', '.join(bench.VARIANTS)} "
        "(variants that do not run a model's file kind are skipped)",
    )
    p.add_argument(
        "--concurrency", type=_concurrency_list, default=[1], help="threads calling at once, one Model each, e.g. 1,2"
    )
    p.add_argument("--image", help="feed this real image (resized to the input) instead of seeded random data")
    p.add_argument(
        "--image-range",
        choices=sorted(bench.IMAGE_RANGES),
        default="-1,1",
        metavar="RANGE",
        help="value range of float image inputs: -1,1 (default), 0,1 or 0,255",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random input (default 0)")
    p.add_argument("--shape", type=_shape, help="the first input's shape for dynamic dimensions, e.g. 1,3,64,64")
    p.add_argument("--no-check", action="store_true", help="skip the operator check when loading")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write JSON (to stdout without FILE)")
    p.add_argument("--csv", nargs="?", const="-", metavar="FILE", help="write CSV (to stdout without FILE)")
    p.add_argument("--plot", metavar="FILE.png", help="draw latency distributions and the thread sweep")
    progress = p.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress", dest="progress", action="store_true", default=None, help="always draw a progress bar on stderr"
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show a progress bar")
    p.set_defaults(func=run)


class ProgressBar:
    """A one-line bar on a stream (stderr), redrawn at most ten times a second."""

    def __init__(self, stream, enabled: bool, width: int = 24):
        self.stream = stream
        self.enabled = enabled
        self.width = width
        self._label = ""
        self._total = 1
        self._last = 0.0

    def start(self, label: str, total: int) -> None:
        self._label, self._total, self._last = label, max(1, total), 0.0
        self.update(0, force=True)

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and done < self._total and now - self._last < 0.1:
            return
        self._last = now
        filled = self.width * done // self._total
        bar = "#" * filled + "-" * (self.width - filled)
        self.stream.write(f"\r{self._label} [{bar}] {done}/{self._total}")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.update(self._total, force=True)
            self.stream.write("\n")
            self.stream.flush()


def _resolve(model: str) -> Path:
    from .. import zoo
    from ..cli import UsageError

    if model in zoo.names():
        return zoo.path(model)
    path = Path(model)
    if not path.exists():
        raise UsageError(f"{model}: no such file, and no such manifest name (edgeinf fetch --list shows them)")
    if not path.is_file():
        raise UsageError(f"{model}: not a model file")
    return path


def configurations(models, variants, threads, concurrency):
    """(path, variant, threads, concurrency) to measure, and (path, variant, reason) skipped."""
    todo, skipped = [], []
    for model in models:
        path = _resolve(model)
        chosen = []
        for v in variants:
            name = bench.auto_variant(path) if v == "auto" else v
            if name in chosen:
                continue
            if not bench.variant_fits(name, path):
                skipped.append((path, name, f"{name} does not run {path.suffix or 'this'} files"))
                continue
            chosen.append(name)
        for name, t, c in itertools.product(chosen, threads, concurrency):
            todo.append((path, name, t, c))
    return todo, skipped


def run(args) -> int:
    from ..cli import UsageError, check_output_file

    if args.json == "-" and args.csv == "-":
        raise UsageError("--json and --csv cannot both go to stdout; give one of them a FILE")
    for flag in ("json", "csv", "plot"):  # an output that cannot be written fails now, not after the runs
        target = getattr(args, flag)
        if target and target != "-":
            check_output_file(Path(target), f"--{flag}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise UsageError("--plot needs matplotlib: pip install 'edgeinf[plot]'")
    if args.image:
        image = Path(args.image)
        if not image.is_file():
            raise UsageError(f"--image {image}: {'not a file' if image.exists() else 'no such file'}")
    todo, skipped = configurations(args.models, args.backend, args.threads, args.concurrency)
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = ProgressBar(sys.stderr, show)
    results, failed = [], []
    for path, variant, threads, conc in todo:
        bar.start(f"{path.name} {variant} threads={threads} concurrency={conc}", args.runs)
        try:
            record = bench.bench_model(
                path,
                variant=variant,
                threads=threads,
                concurrency=conc,
                runs=args.runs,
                warmup=args.warmup,
                image=args.image,
                image_range=args.image_range,
                seed=args.seed,
                shape=args.shape,
                check=not args.no_check,
                on_run=bar.update,
            )
        except (EdgeInfError, ValueError, OSError) as exc:
            bar.finish()
            reason = f"{type(exc).__name__}: {exc}"
            failed.append({"model": str(path), "variant": variant, "threads": threads, "concurrency": conc})
            skipped.append((path, variant, reason))
            print(f"edgeinf: error: {path.name} on {variant}: {reason}", file=sys.stderr)
            continue
        bar.finish()
        results.append(record)
    document = {
        "schema": bench.SCHEMA,
        **bench.environment(),
        "config": {
            "runs": args.runs,
            "warmup": args.warmup,
            "threads": args.threads,
            "concurrency": args.concurrency,
            "backends": args.backend,
            "input": f"image {args.image}" if args.image else f"random seed={args.seed}",
        },
        "results": results,
        "skipped": [{"model": str(p), "variant": v, "reason": r} for p, v, r in skipped],
    }
    if args.json:
        _write(args.json, json.dumps(document, indent=2) + "\n")
    if args.csv:
        _write(args.csv, to_csv(results))
    if "-" not in (args.json, args.csv):  # stdout is free for the human view
        print(to_table(document))
    if args.plot:
        try:
            plot(results, args.plot)
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install 'edgeinf[plot]'") from None
    if not results:
        print("edgeinf: error: nothing was measured", file=sys.stderr)
        return 2
    return 1 if failed else 0


def _write(target: str, text: str) -> None:
    if target == "-":
        sys.stdout.write(text)
    else:
        Path(target).write_text(text)


def _flat(record: dict) -> dict:
    flat = {k: v for k, v in record.items() if not isinstance(v, dict)}
    flat.update({k: v for k, v in record["latency_us"].items() if k != "samples"})
    flat.update(record["memory"])
    return flat


def to_csv(results: list[dict]) -> str:
    """One row per measured configuration, columns `CSV_COLUMNS`."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for record in results:
        writer.writerow(_flat(record))
    return out.getvalue()


def to_table(document: dict) -> str:
    """The human view: one line per configuration, then what was skipped and where it ran."""
    head = (
        f"{'model':<36} {'variant':<16} {'thr':>3} {'conc':>4} {'median ms':>9} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'calls/s':>8} {'load ms':>8} {'first ms':>8} {'peak MiB':>8} {'growth KiB':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in document["results"]:
        lat, mem = r["latency_us"], r["memory"]
        lines.append(
            f"{r['model_name'][:36]:<36} {r['variant']:<16} {r['threads']:>3} {r['concurrency']:>4} "
            f"{lat['median_us'] / 1e3:>9.3f} {lat['p95_us'] / 1e3:>8.3f} {lat['p99_us'] / 1e3:>8.3f} "
            f"{lat['max_us'] / 1e3:>8.3f} {r['throughput_per_s']:>8.1f} {r['load_ms']:>8.1f} "
            f"{r['first_inference_ms']:>8.2f} {mem['peak_rss_bytes'] / 2**20:>8.1f} {mem['growth_bytes'] / 1024:>10.1f}"
        )
    for s in document["skipped"]:
        lines.append(f"skipped: {Path(s['model']).name} on {s['variant']}: {s['reason']}")
    m, v = document["machine"], document["versions"]
    if m.get("conditions"):
        lines.append(f"conditions: {board.conditions_summary(m['conditions'])}")
    runtimes = ", ".join(f"{k} {val}" for k, val in v.items() if val and k not in ("edgeinf", "python", "numpy"))
    lines.append(
        f"{document['date']}  {m['cpu']} ({m['arch']}, {m['isa']}, {m['cores_usable']} usable cores)  "
        f"edgeinf {v['edgeinf']}, python {v['python']}, numpy {v['numpy']}, {runtimes}"
    )
    return "\n".join(lines)


def plot(results: list[dict], target: str) -> None:
    """Latency distributions (left) and median/p95 latency against thread count (right), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    labels = [f"{r['model_name']}\n{r['variant']} t{r['threads']} c{r['concurrency']}" for r in results]
    data = [[t / 1e3 for t in r["latency_us"]["samples"]] for r in results]
    try:
        left.boxplot(data, orientation="horizontal", whis=(1, 99), showfliers=True)
    except TypeError:  # matplotlib < 3.10
        left.boxplot(data, vert=False, whis=(1, 99), showfliers=True)
    left.set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
    spread = [min(d) for d in data if d], [max(d) for d in data if d]
    if spread[0] and max(spread[1]) > 20 * max(min(spread[0]), 1e-6):
        left.set_xscale("log")  # a sweep across variants spans decades
    left.set_xlabel("latency per call (ms); whiskers at p1/p99")
    left.set_title("latency distribution")
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        groups.setdefault((r["model_name"], r["variant"], r["concurrency"]), []).append(r)
    for (name, variant, conc), rows in groups.items():
        rows.sort(key=lambda r: r["threads"])
        xs = [r["threads"] for r in rows]
        line = right.plot(
            xs, [r["latency_us"]["median_us"] / 1e3 for r in rows], "o-", label=f"{name} {variant} c{conc}"
        )
        right.plot(xs, [r["latency_us"]["p95_us"] / 1e3 for r in rows], "x--", color=line[0].get_color())
    right.set_xlabel("runtime threads")
    right.set_ylabel("latency (ms): median solid, p95 dashed")
    right.set_title("thread sweep")
    right.set_xticks(sorted({r["threads"] for r in results}))
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(target, dpi=100)
    plt.close(fig)
