"""NCNN backend: a .param graph and its .bin weights on the `ncnn` package, on the CPU.

Blob names and input shapes come from edgeinf's own reading of the .param (the Input
layers' w/h/c params; an undeclared channel count is read off the convolutions that
consume the input), so specs exist before the runtime is touched. NCNN works on CHW
float Mats; edgeinf presents NCHW arrays with a batch of one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..errors import RuntimeFailure
from ..types import Layout, TensorSpec
from .base import OwnedInputsBackend

log = logging.getLogger(__name__)


def _input_shape(params: dict, channels: int | None) -> tuple[int, ...]:
    # Input layer params: 0=w 1=h 2=c (a 0 or absent value is known only at run time).
    w, h, c = (int(params.get(k, 0) or 0) for k in (0, 1, 2))
    return (1, c or channels or -1, h or -1, w or -1)


# Layers that hand their input on unchanged to every output blob.
_PASS_THROUGH = {"Split"}


def _consumed_channels(layer, blob: str) -> int | None:
    """The input channel count a convolution's weights imply, or None when not a convolution."""
    if layer.type not in ("Convolution", "ConvolutionDepthWise") or layer.inputs[:1] != (blob,):
        return None
    params = layer.params
    num_output, weights = params.get(0), params.get(6)
    kernel_w = params.get(1, 0)
    kernel_h = params.get(11, kernel_w)
    group = params.get(7, 1) if layer.type == "ConvolutionDepthWise" else 1
    if not all(isinstance(v, int) and v > 0 for v in (num_output, weights, kernel_w, kernel_h, group)):
        return None
    channels, remainder = divmod(weights * group, num_output * kernel_w * kernel_h)
    return channels if remainder == 0 and channels > 0 else None


def _input_channels(param, blob: str) -> int | None:
    """Channels the layers reading ``blob`` (through Splits) require, if they all agree."""
    consumers: dict[str, list] = {}
    for layer in param.layers:
        for b in layer.inputs:
            consumers.setdefault(b, []).append(layer)
    found: set[int] = set()
    pending, seen = [blob], {blob}
    while pending:
        current = pending.pop()
        for layer in consumers.get(current, ()):
            if layer.type in _PASS_THROUGH:
                pending.extend(b for b in layer.outputs if b not in seen)
                seen.update(layer.outputs)
                continue
            channels = _consumed_channels(layer, current)
            if channels is not None:
                found.add(channels)
    return found.pop() if len(found) == 1 else None


class NCNNBackend(OwnedInputsBackend):
    """A model on ncnn.Net.

    Args:
        path: the .param file; its weights are the .bin beside it.
        num_threads: ncnn's thread count.
        fp16: fp16 storage and arithmetic where ncnn supports them (ncnn's default is on);
            False keeps every layer in float32.
        light_mode: recycle intermediate blobs to save memory (ncnn's default, on).
        vulkan: GPU compute through Vulkan; off by default (boards here have no driver).
        param: the parsed .param (an `NcnnParam`), when the caller has it.
    """

    name = "ncnn"
    takes_unbatched = True  # ncnn.Mat is CHW: a caller may leave out the batch of one

    def __init__(
        self,
        path,
        *,
        num_threads: int,
        fp16: bool = True,
        light_mode: bool = True,
        vulkan: bool = False,
        param=None,
    ):
        super().__init__()
        import ncnn

        path = Path(path)
        if param is None:
            from ..formats.ncnn_param import read_ncnn_param

            param = read_ncnn_param(path)
        self.runtime = f"ncnn {getattr(ncnn, '__version__', 'unknown')}"
        self._ncnn = ncnn
        net = ncnn.Net()
        net.opt.use_vulkan_compute = bool(vulkan)
        net.opt.num_threads = int(num_threads)
        net.opt.lightmode = bool(light_mode)
        for flag in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic"):
            setattr(net.opt, flag, bool(fp16))
        # A failed load must stop here: ncnn segfaults later if a bad return code is ignored.
        if net.load_param(str(path)) != 0:
            raise RuntimeFailure(f"{self.runtime} refused the graph in {path} (load_param failed)")
        weights = path.with_suffix(".bin")
        if param.bin_path is None and param.expected_bin_size == 0:
            # The reader found no layer that loads weights: no .bin is needed. (An empty
            # reader would hand zeros to a layer that did load some: only used when none does.)
            loaded = net.load_model(ncnn.DataReaderFromEmpty())
        else:
            loaded = net.load_model(str(weights))
        if loaded != 0:
            raise RuntimeFailure(f"{self.runtime} refused the weights in {weights} (load_model failed)")
        self._net = net
        self.num_threads = int(num_threads)
        self.delegate = "vulkan" if vulkan else None
        self.details.update(fp16=bool(fp16), light_mode=bool(light_mode), layers=len(param.layers))

        inputs = [layer for layer in param.layers if layer.type == "Input"]
        self.inputs = tuple(
            TensorSpec(
                name=layer.outputs[0],
                shape=_input_shape(layer.params, _input_channels(param, layer.outputs[0])),
                dtype=np.dtype(np.float32),
                layout=Layout.NCHW,
                index=i,
            )
            for i, layer in enumerate(inputs)
        )
        self.outputs = tuple(
            TensorSpec(name=name, shape=(1, -1, -1, -1), dtype=np.dtype(np.float32), layout=Layout.NCHW, index=i)
            for i, name in enumerate(net.output_names())
        )
        self._init_inputs()

    def invoke(self) -> list[np.ndarray]:
        extractor = self._net.create_extractor()
        mats = []
        for spec, array in self._fed_inputs():
            # ncnn.Mat(array) wraps the array's memory; a first layer that works in place
            # (ReLU, Split) would then write into the caller's array, and on this ncnn it
            # crashes in extract(). The clone is ncnn's own copy, alive until extraction ends.
            mat = self._ncnn.Mat(array.reshape(array.shape[1:])).clone()
            mats.append(mat)
            if extractor.input(spec.name, mat) != 0:
                raise RuntimeFailure(f"ncnn rejected input {spec.name!r} of shape {list(array.shape)}")
        results = []
        for spec in self.outputs:
            code, mat = extractor.extract(spec.name)
            if code != 0:
                raise RuntimeFailure(f"ncnn failed to compute output {spec.name!r} (code {code})")
            results.append(np.array(mat)[np.newaxis])  # np.array copies: the Mat dies with the extractor
        del mats
        return results

    def close(self) -> None:
        if self._net is not None:
            self._net.clear()
            self._net = None
