"""The reference pipeline on real video: face detection -> landmarks, `edgeinf run`, latest frames."""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

import edgeinf.sources as sources
from edgeinf.cli import main
from edgeinf.errors import InputError
from edgeinf.face import Face
from edgeinf.pipeline import Pipeline
from edgeinf.pipeline.face import FaceLandmarker, RotatedRect, detection_stage, face_crop_rect, face_mesh_pipeline

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "face_mesh.toml"


@pytest.fixture(scope="module")
def small_clip(tmp_path_factory):
    pytest.importorskip("cv2")
    from clips import write_clip

    return write_clip(tmp_path_factory.mktemp("video") / "faces.avi", count=4, size=(320, 240))


def test_crop_rect_levels_the_eyes_and_grows_the_box_as_mediapipe_does():
    # Eyes on a line rising 30 degrees to the left eye (image y grows downwards).
    keypoints = np.zeros((6, 2), np.float32)
    keypoints[0] = (100, 100)
    keypoints[1] = (100 + 40 * math.cos(math.pi / 6), 100 - 40 * math.sin(math.pi / 6))
    face = Face((80.0, 60.0, 160.0, 180.0), 0.9, keypoints)
    rect = face_crop_rect(face)
    assert rect.size == pytest.approx(120 * 1.5) and (rect.center_x, rect.center_y) == (120.0, 120.0)
    assert rect.rotation == pytest.approx(-math.pi / 6)
    # The eye line maps to a horizontal line in the crop.
    crop_points = np.array([[10.0, 50.0], [150.0, 50.0]])
    frame_points = rect.to_frame(crop_points, 192)
    slope = (frame_points[1, 1] - frame_points[0, 1]) / (frame_points[1, 0] - frame_points[0, 0])
    assert slope == pytest.approx(-math.tan(math.pi / 6))
    assert np.allclose(RotatedRect(5, 5, 10, 0.0).corners(), [[0, 0], [10, 0], [0, 10]])


def test_landmarks_on_the_real_photo_fall_on_the_face():
    from clips import photo_rgb

    rgb = photo_rgb()
    frame = sources.Frame(rgb, "rgb", 0, 0.0)
    faces = detection_stage()(frame)
    assert len(faces) == 1
    mesh = FaceLandmarker()(frame, faces[0])
    xmin, ymin, xmax, ymax = faces[0].box
    inside = (
        (mesh.points[:, 0] > xmin - 0.1 * (xmax - xmin))
        & (mesh.points[:, 0] < xmax + 0.1 * (xmax - xmin))
        & (mesh.points[:, 1] > ymin - 0.3 * (ymax - ymin))
        & (mesh.points[:, 1] < ymax + 0.1 * (ymax - ymin))
    )
    assert mesh.presence > 0.9 and inside.mean() > 0.95, (mesh.presence, inside.mean())
    # The mesh's eye corners sit near the detector's eye keypoints (MediaPipe mesh indices 33 and 263).
    eye_distance = np.linalg.norm(faces[0].keypoints[0] - faces[0].keypoints[1])
    for mesh_index, keypoint in ((33, 0), (263, 1)):
        assert np.linalg.norm(mesh.points[mesh_index, :2] - faces[0].keypoints[keypoint]) < 0.5 * eye_distance


def test_the_native_crop_gives_the_landmarks_of_the_opencv_crop(small_clip):
    # Packed frames are cropped natively into the model's input (where that crop is
    # vectorized); the mesh matches the one from OpenCV's warpAffine (the other path) to a
    # fraction of a pixel of the crop, and differs from it (the native path did run).
    from clips import photo_rgb

    from edgeinf.isa import supported_isas
    from edgeinf.pipeline.face import crop, frame_bgr

    if "avx2" not in supported_isas():
        pytest.skip("the native crop runs where it is vectorized (AVX2)")

    with sources.open(small_clip) as source:
        frames = [sources.Frame(photo_rgb(), "rgb", 0, 0.0), *source]
    detect, landmarker = detection_stage(), FaceLandmarker()
    checked = 0
    for frame in frames:
        for face in detect(frame):
            mesh = landmarker(frame, face)
            rect = face_crop_rect(face)
            patch = crop(frame_bgr(frame), rect, landmarker.size)
            outputs = landmarker.model.run_image(patch, color="bgr", mean=0.0, std=255.0)
            raw = np.asarray(outputs[landmarker._points], np.float32).reshape(-1, 3)
            error = np.abs(mesh.points[:, :2] - rect.to_frame(raw[:, :2], landmarker.size)).max()
            assert 0 < error < 0.002 * rect.size, (frame.format, error, rect.size)
            checked += 1
    assert checked >= 2


def test_edgeinf_run_prints_one_json_line_per_frame_matching_the_direct_models(small_clip, capsys, tmp_path):
    pytest.importorskip("ai_edge_litert")
    # the example's deadlines raised far above any frame's time (an emulated Pi runs the
    # models 20-50x slower): this test is about the answers, the deadlines have their own tests
    relaxed = tmp_path / "face_mesh.toml"
    relaxed.write_text(re.sub(r"timeout_s = [0-9.]+", "timeout_s = 300.0", EXAMPLE.read_text()))
    assert main(["run", str(relaxed), "--source", str(small_clip), "--summary"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    results, summary = lines[:-1], lines[-1]["summary"]
    assert [r["seq"] for r in results] == [0, 1, 2, 3]
    assert summary["frames_completed"] == 4 and summary["stages"]["landmarks"]["ok"] == 4
    detect, landmarker = detection_stage(), FaceLandmarker()
    with sources.open(small_clip) as source:
        frames = list(source)
    for result, frame in zip(results, frames):
        faces = detect(frame)
        assert result["stages"]["faces"]["status"] == "ok" and len(result["stages"]["faces"]["value"]) == len(faces)
        assert len(faces) >= 1
        meshes = result["stages"]["landmarks"]["value"]  # computed in the stage's own process
        for mesh, face in zip(meshes, faces):
            direct = landmarker(frame, face)
            assert mesh["presence"] == pytest.approx(direct.presence, abs=1e-5)
            np.testing.assert_allclose(np.array(mesh["points"]), direct.points, atol=0.011)


@pytest.mark.parametrize(
    "text, message",
    [
        ('[pipeline]\nname = "x"\nspeed = 3\n[[stage]]\nname = "a"\nfactory = "m:f"\n', "unknown key"),
        ("[pipeline]\n", "at least one"),
        ('[[stage]]\nname = "a"\nfactory = "no_such_module:f"\n', "cannot import"),
        ('[[stage]]\nname = "a"\nfactory = "m:f"\n[[stage', "not valid TOML"),
        ('[[stage]]\nname = "a"\nfactory = "m:f"\nworkers = "two"\n', "workers must be int"),
        ('[[stage]]\nname = "a"\nfactory = "m:f"\ninputs = "faces"\n', "inputs must be list"),
        ('[[stage]]\nname = "a"\nfactory = "m:f"\nprocess = 1\n', "process must be bool"),
        (
            '[[stage]]\nname = "a"\nfactory = "m:f"\nbreaker_failures = 0\n',
            "failures must be",
        ),
        ('[[stage]]\nfactory = "m:f"\n', "needs name"),
    ],
)
def test_bad_pipeline_files_are_usage_errors_naming_the_problem(tmp_path, small_clip, capsys, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["run", str(path), "--source", str(small_clip)]) == 2
    assert message in capsys.readouterr().err


def test_a_slow_pipeline_on_a_realtime_source_processes_the_newest_frames(clip):
    fps = 50.0
    period = 1.0 / fps
    with Pipeline("slow", max_in_flight=1) as pipe:
        pipe.add("slow", lambda frame: time.sleep(3 * period) or frame.seq)
        source = sources.open(clip, realtime=True, fps=fps)
        results = list(pipe.run(source))
    seqs = [r["slow"] for r in results]
    assert seqs == sorted(seqs) and source.stats.dropped > 0
    assert pipe.metrics.summary()["frames_dropped_by_source"] == source.stats.dropped
    assert np.diff(seqs).mean() >= 1.5, f"the pipeline should skip stale frames, got {seqs}"
    # Time from capture to the stage starting is the frame's age; the median stays within a period.
    assert np.median([r.latency_s - r.stages["slow"].latency_s for r in results]) < period


def assert_same_meshes(frames, futures, reference_pipeline) -> None:
    """Each future's faces and meshes are exactly those of the two-stage pipeline on its frame."""
    for frame, future in zip(frames, futures):
        expected, result = reference_pipeline.process(frame), future.result()
        assert result.ok, result.stages
        assert [f.box for f in result["faces"]] == [f.box for f in expected["faces"]] and result["faces"]
        for mesh, reference in zip(result["landmarks"], expected["landmarks"]):
            np.testing.assert_array_equal(mesh.points, reference.points)
            assert mesh.face.box == reference.face.box and mesh.rect == reference.rect


def test_the_process_pipeline_meshes_whole_frames_in_each_process_as_the_threads_do(small_clip):
    pytest.importorskip("ai_edge_litert")
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("needs /dev/shm")
    with sources.open(small_clip) as source:
        frames = list(source)
    ours = f"edgeinf-{os.getpid()}-*"  # segments are named after the pid that made them
    before = {p.name for p in shm.glob(ours)}
    with face_mesh_pipeline() as threads, face_mesh_pipeline(processes=2, timeout_s=300.0) as processes:
        processes.start()
        stage = processes.stages["landmarks"]
        assert len({w.process.pid for w in stage.live_workers}) == 2  # two replicas of the whole chain
        futures = [processes.submit(frame) for frame in frames]  # two frames in flight, one per process
        assert_same_meshes(frames, futures, threads)
    assert not {p.name for p in shm.glob(ours)} - before, "a shared-memory segment outlived the pipeline"


@pytest.mark.parametrize("processes", [-1, 65, 2.0, 0.0, "2"])
def test_a_bad_process_count_is_refused_naming_it(processes):
    with pytest.raises(InputError, match="processes must be"):
        face_mesh_pipeline(processes=processes)


@pytest.mark.parametrize("processes", [False, 2])
def test_a_bad_frames_in_flight_limit_is_refused_naming_it(processes):
    # checked before any process starts or model loads
    with pytest.raises(InputError, match="max_in_flight must be"):
        face_mesh_pipeline(processes=processes, max_in_flight=0)


def test_whole_frames_on_threads_mesh_each_frame_as_the_stage_threads_do(small_clip):
    pytest.importorskip("ai_edge_litert")
    with sources.open(small_clip) as source:
        frames = list(source)
    with face_mesh_pipeline() as stages, face_mesh_pipeline(threads=2) as whole:
        futures = [whole.submit(frame) for frame in frames]  # two frames in flight, one per thread
        assert_same_meshes(frames, futures, stages)
        workers = whole.stages["landmarks"].live_workers
        assert len(workers) == 2 and all(len(w.built) == 1 for w in workers)  # each thread its own models
        first, second = (next(iter(w.built.values())) for w in workers)
        assert first is not second


@pytest.mark.parametrize(
    "threads, processes, message",
    [
        (0, False, "threads must be"),
        (65, False, "threads must be"),
        (2.0, False, "threads must be"),
        (2, 2, "not both"),
    ],
)
def test_a_bad_thread_count_is_refused_naming_it(threads, processes, message):
    with pytest.raises(InputError, match=message):
        face_mesh_pipeline(threads=threads, processes=processes)
