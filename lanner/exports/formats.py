"""Every export format the SDK names, and whether this server can make it.

A format is offered when the Python modules its exporter imports are importable here (checked once per process
with ``importlib.util.find_spec``, nothing imported); otherwise a request for it is refused up front (422) with
what it needs. Vendor toolchains that no package registry ships, and packages that would break the rest of
Lanner's environment, are refused with that reason whatever is installed. On Ray, the workers are assumed to
run the same installation as the server (``LANNER_WORKER_PYTHON``)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass, field
from functools import cache

EXTRA = "pip install 'lanner[export]'"


@dataclass(frozen=True)
class Format:
    name: str
    suffix: str  # what Ultralytics writes next to the weights: ".onnx" (a file) or "_openvino_model" (a folder)
    modules: tuple[str, ...] = ()  # importable modules the exporter needs
    install: str = EXTRA  # how an operator gets them
    never: str | None = None  # why this server never makes it, whatever is installed
    gpu: bool = False  # needs an NVIDIA GPU (TensorRT)
    mobile: bool = False  # the SDK's mobile import links (coreml, coreai, litert)
    precisions: tuple[int, ...] = field(default=(32,))  # quantize values offered here (8 needs calibration data)
    numpy_max: tuple[int, ...] | None = None  # the converter fails with a newer numpy

    @property
    def is_folder(self) -> bool:
        return not self.suffix.startswith(".")

    def download_name(self, stem: str) -> str:
        return f"{stem}{self.suffix}.zip" if self.is_folder else f"{stem}{self.suffix}"


_ONNX = ("onnx", "onnxslim", "onnxruntime")
_VENDOR = "needs {what}, which no package registry ships; this server cannot make it"

FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("torchscript", ".torchscript", ("torch",), precisions=(32, 16)),
    Format("onnx", ".onnx", _ONNX, precisions=(32, 16)),
    Format("openvino", "_openvino_model", ("openvino",), precisions=(32, 16)),
    Format("engine", ".engine", ("tensorrt", *_ONNX), install="pip install tensorrt-cu12 (on a host with an "
           "NVIDIA GPU)", gpu=True, precisions=(32, 16)),
    Format("coreml", ".mlpackage", ("coremltools",), install="pip install 'coremltools>=9.0' 'numpy<=2.3.5' (a "
           "numpy downgrade: not part of lanner[export])", mobile=True, precisions=(32, 16), numpy_max=(2, 3, 5)),
    Format("coreai", ".aimodel", ("coreai_torch",), install="pip install 'coreai-torch>=0.4.3'", mobile=True,
           precisions=(32, 16)),
    Format("saved_model", "_saved_model", ("tensorflow", "onnx2tf", "tf_keras"), install="pip install "
           "'tensorflow<=2.19' onnx2tf tf_keras sng4onnx onnx_graphsurgeon ai-edge-litert (several GB, with "
           "version conflicts: not part of lanner[export])"),
    Format("pb", ".pb", ("tensorflow", "onnx2tf", "tf_keras"), install="pip install 'tensorflow<=2.19' onnx2tf "
           "tf_keras sng4onnx onnx_graphsurgeon (several GB, with version conflicts: not part of lanner[export])"),
    Format("edgetpu", "_edgetpu.tflite", never=_VENDOR.format(what="the Edge TPU compiler (a download from "
           "GitHub, Linux x86_64 only)")),
    Format("litert", ".tflite", ("litert_torch", "ai_edge_litert"), install="pip install 'litert-torch>=0.10' "
           "'ai-edge-litert>=2.3' (it downgrades typing_extensions and pydantic, which Lanner needs: not part "
           "of lanner[export])", mobile=True),
    Format("paddle", "_paddle_model", ("paddle", "x2paddle", "six")),
    Format("mnn", ".mnn", ("MNN", *_ONNX), precisions=(32, 16)),
    Format("ncnn", "_ncnn_model", ("ncnn", "pnnx"), precisions=(32, 16)),
    Format("imx", "_imx_model", never="needs Sony's IMX500 converter with a Java runtime and torch<2.12 (this "
           "server runs a newer torch); this server cannot make it"),
    Format("rknn", "_rknn_model", never="needs Rockchip's rknn-toolkit2, which pins torch 2.4 (this server runs a "
           "newer torch); this server cannot make it"),
    Format("executorch", "_executorch_model", ("executorch",), install="pip install executorch (33 packages, "
           "75 s to install, and its httpx2 changes Starlette's test client: not part of lanner[export])"),
    Format("axelera", "_axelera_model", never=_VENDOR.format(what="Axelera's Voyager SDK")),
    Format("deepx", "_deepx_model", never=_VENDOR.format(what="DEEPX's dx_com compiler")),
    Format("qnn", "_qnn.onnx", never=_VENDOR.format(what="Qualcomm's QNN SDK")),
    Format("hailo", "_hailo_model", never=_VENDOR.format(what="Hailo's Dataflow Compiler")),
    Format("ascend", "_ascend_model", never=_VENDOR.format(what="Huawei's CANN toolkit (atc)")),
    Format("xilinx", "_xilinx_model", never=_VENDOR.format(what="AMD's Vitis AI / Quark toolchain")),
)}
MOBILE_FORMATS = tuple(name for name, f in FORMATS.items() if f.mobile)


@cache
def _numpy_version() -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in importlib.metadata.version("numpy").split(".")[:3] if part.isdigit())
    except importlib.metadata.PackageNotFoundError:
        return ()


@cache
def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def unavailable(name: str) -> str | None:
    """Why this server cannot export to ``name`` (words for the caller), or None when it can."""
    fmt = FORMATS[name]
    if fmt.never:
        return f"format '{name}' {fmt.never}"
    missing = [module for module in fmt.modules if not _importable(module)]
    if missing:
        return f"format '{name}' is not installed on this server (missing {', '.join(missing)}): {fmt.install}"
    if fmt.numpy_max and _numpy_version() > fmt.numpy_max:
        found, wanted = ".".join(map(str, _numpy_version())), ".".join(map(str, fmt.numpy_max))
        return (f"format '{name}' needs numpy<={wanted} (this server has {found}; the converter fails with a newer "
                f"one): {fmt.install}")
    return None


def available() -> list[str]:
    return [name for name in FORMATS if unavailable(name) is None]
