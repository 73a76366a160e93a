"""examples/face_mesh_video.py on a clip made from the real photo."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "face_mesh_video.py"


@pytest.mark.parametrize("layout", [[], ["--threads", "2"]], ids=["stages", "whole-frames-on-threads"])
def test_example_finds_the_face_and_its_mesh_and_writes_the_annotated_video(tmp_path, capsys, layout):
    cv2 = pytest.importorskip("cv2")
    spec = importlib.util.spec_from_file_location("face_mesh_video", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = tmp_path / "annotated.avi"
    # a deadline far above any frame's time (an emulated Pi runs the models 20-50x slower):
    # this test is about the answers, the deadlines have their own tests
    assert example.main(["--frames", "3", "--out", str(out), "--timeout", "300", *layout]) == 0
    lines = capsys.readouterr().out.splitlines()
    frames = [line for line in lines if line.startswith("frame")]
    assert len(frames) == 3
    for line in frames:
        presence = re.search(r"1 face\(s\), mesh presence \[([0-9.]+)\]", line)
        assert presence and float(presence.group(1)) > 0.9, line
    assert "3 frames answered" in lines[-1] and "landmarks: 3 ok" in lines[-1]
    capture = cv2.VideoCapture(str(out))
    assert capture.get(cv2.CAP_PROP_FRAME_COUNT) == 3
    capture.release()
