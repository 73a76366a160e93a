"""Helpers of the cache tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import os

NAME = "face_detection_short_range"


def flip_byte(file, offset=None):
    """Change one byte in place (same size, same inode), as a tamperer would."""
    with open(file, "r+b") as f:
        f.seek(offset if offset is not None else file.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
