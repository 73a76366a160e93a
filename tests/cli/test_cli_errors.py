"""Every `edgeinf` error is one line on stderr with exit code 2 (usage, input) or 1 (failure).

The cases users met are run through the real command (a subprocess); a sweep feeds every
subcommand missing and garbage arguments through `main(argv)` and asserts that none of
them escapes as a traceback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgeinf import cli
from edgeinf.compat import tables

ROOT = Path(__file__).resolve().parents[2]
FACE = "face_detection_short_range"


def edgeinf_cli(*args, cwd=None, **env):
    return subprocess.run(
        [sys.executable, "-m", "edgeinf", *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT), **env),
        cwd=cwd,
        timeout=300,
    )


def error_line(proc, code: int) -> str:
    """The single `edgeinf: error:` line of a failed command, after checking the exit code."""
    assert proc.returncode == code, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("INFO: ")]  # the runtime's banner
    assert len(lines) == 1 and lines[0].startswith("edgeinf: error: "), proc.stderr
    return lines[0]


@pytest.fixture
def photo(model_path):
    return model_path("grace_hopper")


def test_fetch_of_an_unknown_name(tmp_path):
    line = error_line(edgeinf_cli("fetch", "bogus", cwd=tmp_path), 2)
    assert "unknown model 'bogus'" in line and FACE in line


def test_demo_with_a_missing_image(tmp_path):
    line = error_line(edgeinf_cli("demo", "--image", "missing.jpg", cwd=tmp_path), 2)
    assert line == "edgeinf: error: --image missing.jpg: no such file"


def test_demo_with_an_image_that_is_not_one(tmp_path):
    (tmp_path / "notes.jpg").write_text("not a picture\n")
    line = error_line(edgeinf_cli("demo", "--image", "notes.jpg", cwd=tmp_path), 2)
    assert line.startswith("edgeinf: error: --image notes.jpg: not an image this Pillow can read")


def test_demo_with_a_truncated_image(tmp_path, photo):
    (tmp_path / "cut.jpg").write_bytes(photo.read_bytes()[:2000])
    line = error_line(edgeinf_cli("demo", "--image", "cut.jpg", "--out", "o.png", cwd=tmp_path), 2)
    assert line.startswith("edgeinf: error: --image cut.jpg: cannot decode it")


def test_demo_output_into_a_missing_folder_fails_before_the_detection(tmp_path, photo):
    proc = edgeinf_cli("demo", "--image", photo, "--out", tmp_path / "no" / "out.png", cwd=tmp_path)
    line = error_line(proc, 2)
    assert line == f"edgeinf: error: --out {tmp_path / 'no' / 'out.png'}: the folder {tmp_path / 'no'} does not exist"
    assert proc.stdout == "", "nothing was loaded or detected"


def test_demo_output_in_a_format_pillow_cannot_write(tmp_path, photo):
    proc = edgeinf_cli("demo", "--image", photo, "--out", "out.xyz", cwd=tmp_path)
    assert "Pillow cannot write .xyz" in error_line(proc, 2) and proc.stdout == ""


def test_demo_with_a_model_of_another_input_size(tmp_path, model_path, photo):
    pytest.importorskip("ai_edge_litert")
    model_path("face_landmark")
    line = error_line(edgeinf_cli("demo", "--model", "face_landmark", "--image", photo, cwd=tmp_path), 2)
    assert "1x128x128x3 input was expected, got (1, 192, 192, 3)" in line
    assert "the demo runs face_detection_short_range or face_detection_full_range" in line


def test_check_list_targets_needs_no_model():
    proc = edgeinf_cli("check", "--list-targets")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(t) for t in tables.all_targets()] != []


def test_check_without_a_model_says_what_is_missing():
    line = error_line(edgeinf_cli("check"), 2)
    assert "model (or --list-targets)" in line


def test_info_and_check_take_manifest_names(model_path):
    pytest.importorskip("ai_edge_litert")
    model_path(FACE)
    proc = edgeinf_cli("info", FACE, "--threads", "1")
    assert proc.returncode == 0 and f"{FACE}.tflite" in proc.stdout, proc.stderr
    assert edgeinf_cli("check", FACE).returncode == 0


def test_usage_errors_are_one_line_too():
    line = error_line(edgeinf_cli("info", FACE, "--threads", "100000"), 2)
    assert line == (
        "edgeinf: error: argument --threads: expected an integer from 1 to 256, got 100000 (see `edgeinf info --help`)"
    )


# -- errors nobody anticipated --------------------------------------------------------------


@pytest.fixture
def broken_list(monkeypatch):
    def explode(names):
        raise RuntimeError("the listing broke")

    monkeypatch.setattr(cli, "_list_models", explode)


def test_an_unexpected_exception_is_one_line_with_a_hint(broken_list, capsys, monkeypatch):
    monkeypatch.delenv("EDGEINF_DEBUG", raising=False)
    assert cli.main(["fetch", "--list"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "edgeinf: error: unexpected RuntimeError: the listing broke. This is a bug in edgeinf: please report it "
        "with the traceback that --debug (or EDGEINF_DEBUG=1) prints"
    ]


@pytest.mark.parametrize("how", ["env", "flag-before", "flag-after"])
def test_debug_adds_the_traceback(broken_list, capsys, monkeypatch, how):
    monkeypatch.delenv("EDGEINF_DEBUG", raising=False)
    argv = ["fetch", "--list"]
    if how == "env":
        monkeypatch.setenv("EDGEINF_DEBUG", "1")
    elif how == "flag-before":
        argv = ["--debug", *argv]
    else:
        argv = [*argv, "--debug"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and 'raise RuntimeError("the listing broke")' in err
    assert err.splitlines()[-1].startswith("edgeinf: error: unexpected RuntimeError: the listing broke.")


def test_a_multi_line_message_is_cut_to_its_first_line():
    code, message = cli.describe_error(ValueError("first\nsecond\nthird"))
    assert code == 1 and "\n" not in message and message.startswith("unexpected ValueError: first (and 2 more lines")


# -- the sweep ---------------------------------------------------------------------------------

GARBAGE = ["", "-1", "nan", "\x01zz", "/nonexistent/dir/x.png"]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def valid_base(command: str, model: str, tmp_path: Path) -> list[str]:
    """Arguments with which each subcommand does quick, real work, so a garbage value reaches it."""
    return {
        "info": [model],
        "check": [model],
        "demo": ["--out", str(tmp_path / "demo.png"), "--threads", "1"],
        "fetch": ["--list"],
        "power": ["--once", "--root", str(tmp_path)],
        "bench": [model, "--runs", "1", "--warmup", "0", "--no-progress", "--threads", "1"],
    }.get(command, [])


def sweep_cases(model: str, tmp_path: Path):
    for command, parser in subcommands().items():
        yield [command]  # required arguments missing
        yield [command, "--no-such-option"]
        positionals = [a for a in parser._actions if not a.option_strings]
        for value in GARBAGE if positionals else ():
            yield [command, value]
        base = valid_base(command, model, tmp_path)
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or "--debug" in action.option_strings:
                continue
            for value in GARBAGE:
                yield [command, *base, action.option_strings[-1], value]


@pytest.mark.slow
def test_no_subcommand_argument_ends_in_a_traceback(model_path, tmp_path, monkeypatch, capsys):
    model_path("grace_hopper")  # the demo's default photo, cached
    model = str(model_path(FACE))
    monkeypatch.chdir(tmp_path)  # whatever a garbage argument writes lands here
    monkeypatch.delenv("EDGEINF_DEBUG", raising=False)
    cases = list(sweep_cases(model, tmp_path))
    assert {c[0] for c in cases} >= {"info", "check", "demo", "fetch", "power", "bench"}
    for argv in cases:
        try:
            code = cli.main(argv)
        except SystemExit as stop:  # argparse's own usage errors
            code = stop.code
        out, err = capsys.readouterr()
        assert code in (0, 1, 2), (argv, code, err[-1000:])
        assert "Traceback" not in err, (argv, err)
        if code:
            assert any(line.startswith("edgeinf: error: ") for line in err.splitlines()), (argv, code, err, out)
