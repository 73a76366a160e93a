"""Parsing the TOML files edgeinf reads (pipeline files, the service's configuration).

Python 3.11 parses TOML itself (``tomllib``); older ones need the ``tomli`` package.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import InputError


def parse_toml(text: str, path: Path, what: str) -> dict:
    """The table ``text`` (read from ``path``) holds.

    Args:
        what: what the file is, for the message when tomli is missing ("a pipeline file").

    Raises:
        InputError: the text is not valid TOML (the message names ``path``), or Python is
            older than 3.11 and tomli is not installed.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        try:
            import tomli as tomllib
        except ImportError:
            raise InputError(f"reading {what} on Python < 3.11 needs tomli: pip install tomli") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path} is not valid TOML: {exc}") from None
