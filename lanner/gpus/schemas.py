"""Wire shapes for ``GET /api/gpus``: camelCase, like the rest of the Ultralytics-compatible API."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from lanner.gpus.catalogue import TIERS, Catalogue, GpuType


class GpuItem(BaseModel):
    """One catalogue entry as a client sees it; ``allowed`` is for the calling account's tier."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    display_name: str
    architecture: str
    vram_gb: float = Field(description="GPU memory in GB; 0 means the type trains in host RAM (cpu).")
    bandwidth_gbs: float | None = Field(description="Memory bandwidth in GB/s, if known.")
    fp32_tflops: float | None = Field(description="FP32 TFLOPS; null for cpu, which is measured by a probe.")
    fp16_tflops: float | None = Field(description="Dense FP16/BF16 tensor TFLOPS.")
    price_per_hour: float = Field(description="USD per hour on this server.")
    min_tier: str = Field(description="Lowest account tier that may use the type.")
    offered: bool = Field(description="Whether this server offers the type at all; false rows are reference only.")
    allowed: bool = Field(description="Whether the caller may start training on it (offered and tier high enough).")
    host_vcpus: int = Field(description="vCPUs the host gives with one GPU of this type (they run the data loader).")
    host_ram_gb: float = Field(description="Host RAM in GB with one GPU of this type.")
    multi_gpu_efficiency: float | None = Field(description="Per-GPU scaling of a run on several GPUs of this type on "
                                               "one node (DDP): n GPUs train n x this as fast as one; null: one "
                                               "device per run. An assumption until measured.")

    @classmethod
    def from_gpu(cls, gpu: GpuType, *, tier: str) -> GpuItem:
        return cls(id=gpu.id, display_name=gpu.display_name, architecture=gpu.architecture, vram_gb=gpu.vram_gb,
                   bandwidth_gbs=gpu.bandwidth_gbs, fp32_tflops=gpu.fp32_tflops, fp16_tflops=gpu.fp16_tflops,
                   price_per_hour=gpu.price_per_hour, min_tier=gpu.min_tier, offered=gpu.offered,
                   allowed=gpu.allowed_for(tier), host_vcpus=gpu.host_vcpus, host_ram_gb=gpu.host_ram_gb,
                   multi_gpu_efficiency=gpu.multi_gpu_efficiency)


class GpuList(BaseModel):
    gpus: list[GpuItem]
    tiers: list[str] = Field(description="Account tiers, lowest first.")

    @classmethod
    def from_catalogue(cls, catalogue: Catalogue, *, tier: str) -> GpuList:
        return cls(gpus=[GpuItem.from_gpu(gpu, tier=tier) for gpu in catalogue], tiers=list(TIERS))
