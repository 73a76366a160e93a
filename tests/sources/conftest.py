from __future__ import annotations

import pytest

pytest.importorskip("cv2")


@pytest.fixture(scope="session")
def clip(tmp_path_factory):
    from clips import write_clip

    return write_clip(tmp_path_factory.mktemp("video") / "pan_zoom.avi")
