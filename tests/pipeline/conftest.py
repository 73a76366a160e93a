from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The clip maker of tests/sources, shared.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sources"))


@pytest.fixture(scope="session")
def clip(tmp_path_factory):
    pytest.importorskip("cv2")
    from clips import write_clip

    return write_clip(tmp_path_factory.mktemp("video") / "pan_zoom.avi")
