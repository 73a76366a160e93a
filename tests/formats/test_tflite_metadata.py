"""TFLite metadata: the input normalization a model states, read by edgeinf's own verified reader."""

from __future__ import annotations

import contextlib

import cv2
import flatbuffers
import numpy as np
import pytest

import edgeinf
from edgeinf.errors import ModelFileError
from edgeinf.formats.tflite import read_tflite
from edgeinf.formats.tflite_metadata import Normalization, input_normalization, read_metadata_root
from edgeinf.formats.tflite_schema import schema
from edgeinf.formats.tflite_writer import pack, unpack


def metadata_buffer(mean: list[float], std: list[float], input_name: str = "input") -> bytes:
    """A ModelMetadata flatbuffer (metadata_schema.fbs) whose first input has NormalizationOptions."""
    b = flatbuffers.Builder(256)

    def floats(values):
        b.StartVector(4, len(values), 4)
        for v in reversed(values):
            b.PrependFloat32(v)
        return b.EndVector()

    def tables(offsets):
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    mean_at, std_at = floats(mean), floats(std)
    b.StartObject(2)  # NormalizationOptions: mean, std
    b.PrependUOffsetTRelativeSlot(0, mean_at, 0)
    b.PrependUOffsetTRelativeSlot(1, std_at, 0)
    norm = b.EndObject()
    b.StartObject(2)  # ProcessUnit: options_type, options
    b.PrependUint8Slot(0, 1, 0)  # ProcessUnitOptions.NormalizationOptions
    b.PrependUOffsetTRelativeSlot(1, norm, 0)
    unit = b.EndObject()
    units = tables([unit])
    name = b.CreateString(input_name)
    b.StartObject(5)  # TensorMetadata: name, description, dimension_names, content, process_units
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependUOffsetTRelativeSlot(4, units, 0)
    tensor = b.EndObject()
    inputs = tables([tensor])
    b.StartObject(3)  # SubGraphMetadata: name, description, input_tensor_metadata
    b.PrependUOffsetTRelativeSlot(2, inputs, 0)
    subgraph = b.EndObject()
    subgraphs = tables([subgraph])
    b.StartObject(4)  # ModelMetadata: name, description, version, subgraph_metadata
    b.PrependUOffsetTRelativeSlot(3, subgraphs, 0)
    root = b.EndObject()
    b.Finish(root, file_identifier=b"M001")
    return bytes(b.Output())


def with_metadata(model_bytes: bytes, metadata: bytes) -> bytes:
    """The model with ``metadata`` stored as its TFLITE_METADATA buffer."""
    model = unpack(model_bytes)
    buffer = schema().BufferT()
    buffer.data = np.frombuffer(metadata, np.uint8)
    model.buffers.append(buffer)
    entry = schema().MetadataT()
    entry.name = "TFLITE_METADATA"
    entry.buffer = len(model.buffers) - 1
    model.metadata = [*(model.metadata or []), entry]
    return pack(model)


@pytest.fixture(scope="module")
def face_bytes(model_path):
    return model_path("face_detection_short_range").read_bytes()


@pytest.fixture(scope="module")
def photo(model_path):
    return cv2.imread(str(model_path("grace_hopper")))


def test_the_stated_normalization_is_read(face_bytes):
    data = with_metadata(face_bytes, metadata_buffer([127.5], [127.5]))
    assert input_normalization(read_tflite(data)) == {0: Normalization((127.5,), (127.5,))}
    rgb = with_metadata(face_bytes, metadata_buffer([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]))
    (norm,) = input_normalization(read_tflite(rgb)).values()
    np.testing.assert_allclose(norm.mean, [123.675, 116.28, 103.53], rtol=1e-6)
    np.testing.assert_allclose(norm.std, [58.395, 57.12, 57.375], rtol=1e-6)


def test_a_model_without_metadata_states_nothing(face_bytes):
    assert input_normalization(read_tflite(face_bytes)) == {}


@pytest.mark.parametrize(
    "mean, std, message",
    [([127.5], [0.0], "non-zero std"), ([1.0, 2.0], [1.0, 2.0, 3.0], "2 means but 3 stds"), ([], [1.0], "1..")],
)
def test_unusable_values_are_refused(face_bytes, mean, std, message):
    data = with_metadata(face_bytes, metadata_buffer(mean, std))
    with pytest.raises(ModelFileError, match=message):
        input_normalization(read_tflite(data))


def test_corrupt_metadata_is_a_model_file_error_never_a_crash(rng):
    good = metadata_buffer([127.5], [127.5])
    assert read_metadata_root(good).get("subgraph_metadata")
    with pytest.raises(ModelFileError, match="M001"):
        read_metadata_root(good[:4] + b"XXXX" + good[8:])
    for cut in range(len(good)):
        with contextlib.suppress(ModelFileError):  # some cuts only drop padding
            read_metadata_root(good[:cut])
    for _ in range(300):  # random byte changes: either readable or a ModelFileError, nothing else
        mutated = bytearray(good)
        for at in rng.integers(8, len(good), size=3):
            mutated[at] = int(rng.integers(0, 256))
        try:
            root = read_metadata_root(bytes(mutated))
            for sub in root.get("subgraph_metadata") or []:
                for tensor in sub.get("input_tensor_metadata") or []:
                    for unit in tensor.get("process_units") or []:
                        unit.get("options")
        except ModelFileError:
            pass


def test_the_normalization_stated_in_the_metadata_is_applied(model_path, photo, tmp_path):
    pytest.importorskip("ai_edge_litert")
    plain = model_path("face_detection_short_range")
    for mean, std in [(127.5, 127.5), (0.0, 255.0)]:
        path = tmp_path / f"face_{int(std)}.tflite"
        path.write_bytes(with_metadata(plain.read_bytes(), metadata_buffer([mean], [std])))
        with edgeinf.load(path, num_threads=1) as stated, edgeinf.load(plain, num_threads=1) as model:
            got = stated.run_image(photo, color="bgr", letterbox=True)
            want = model.run_image(photo, color="bgr", letterbox=True, mean=mean, std=std)
            for name in want:
                np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name}, mean={mean} std={std}")
            # the caller's own mean/std still win over the metadata
            mine = stated.run_image(photo, color="bgr", letterbox=True, mean=127.5, std=127.5)
            theirs = model.run_image(photo, color="bgr", letterbox=True, mean=127.5, std=127.5)
            np.testing.assert_array_equal(mine["regressors"], theirs["regressors"])
