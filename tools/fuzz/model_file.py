"""What the model-file fuzzers (fuzz_tflite, fuzz_ncnn, fuzz_onnx) share.

Each reads its input with its format's reader, then checks the file as `edgeinf check`
would (`read_then_check`, `check_file`). Only edgeinf's documented errors for a bad model may come out;
atheris reports any other exception as a finding. Importing this module instruments the
readers and the checker (`INSTRUMENTED`) so coverage guides the fuzzer through them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import atheris

# what coverage is collected from: the readers and the checker
INSTRUMENTED = ["edgeinf.formats", "edgeinf.compat"]

with atheris.instrument_imports(include=INSTRUMENTED):
    from edgeinf.compat import check
    from edgeinf.errors import ModelFileError, UnsupportedOperatorError

# the answers a bad model may get
DOCUMENTED = (ModelFileError, UnsupportedOperatorError)


def read_then_check(
    data: bytes, read: Callable[[bytes], object], path: Path, targets: Iterable[str | None] = (None,)
) -> None:
    """Read ``data`` with a format's reader; if it reads, write it to ``path`` and check
    it from there (`check_file`)."""
    try:
        read(data)
    except ModelFileError:
        return
    path.write_bytes(data)
    check_file(path, targets)


def check_file(path: Path, targets: Iterable[str | None] = (None,)) -> None:
    """Check the model at ``path`` against each target (None: the installed runtime) and
    render the report, stopping at the first documented refusal."""
    for target in targets:
        try:
            check(path, target=target).to_json()
        except DOCUMENTED:
            return


def fuzz(test_one_input: Callable[[bytes], None]) -> None:
    """Run ``test_one_input`` under atheris with this process's libFuzzer arguments."""
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
