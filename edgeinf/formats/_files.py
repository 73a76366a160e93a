"""Reading a model file's bytes, with the readers' one set of messages for a file that is
missing, a directory or unreadable."""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelFileError


def read_model_file(path: Path, expected: str) -> bytes:
    """The bytes of ``path``.

    Args:
        expected: what the file should be, for the message when it is a directory
            (``"a .tflite file"``).

    Raises:
        ModelFileError: the file does not exist, is a directory or cannot be read.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, expected {expected}") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read: {exc}") from None
