"""CUDA and NVML device names onto catalogue ids: a wrong match would calibrate (or offer) the wrong GPU type."""

from __future__ import annotations

import pytest

from lanner.gpus.catalogue import load_catalogue
from lanner.gpus.probe import gpu_type_for_name


@pytest.mark.parametrize("name, gpu_type", [
    ("Tesla T4", "t4"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA A40", "a40"),
    ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"),
    ("NVIDIA GeForce RTX 3090", "rtx-3090"),
    ("NVIDIA RTX A6000", "rtx-a6000"),
    ("NVIDIA RTX A4500", "rtx-a4500"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA RTX 2000 Ada Generation", "rtx-2000-ada"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000"),
    ("NVIDIA RTX PRO 4500 Blackwell", "rtx-pro-4500"),
    # Not in the catalogue: never another type's id, and never the CPU's.
    ("NVIDIA A10", None),
    ("NVIDIA A100-SXM4-40GB", None),
    ("Tesla V100-SXM2-16GB", None),
    ("NVIDIA GeForce GTX 1080 Ti", None),
])
def test_device_names_map_to_their_catalogue_type(name: str, gpu_type: str | None) -> None:
    assert gpu_type_for_name(name) == gpu_type
    if gpu_type is not None:
        assert gpu_type in load_catalogue()
