"""Wire shapes of ``deployments.*``: the SDK's request bodies and its deployment item (``DeploymentsRetrieveResponse``
and ``DeploymentsListResponse``). Lanner adds ``runtime`` (``onnx`` or ``pytorch``) to an item, and accepts
``runtime`` and ``maxInstances`` on create as extensions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import JsonObject
from lanner.db import iso
from lanner.deployments.models import Deployment

REGION = "us"  # the data region of this server, as every domain answers it
# The SDK's 42 endpoint regions (ultralytics_platform.resources.deployments.create).
REGIONS = (
    "asia-east1", "asia-northeast1", "asia-northeast2", "asia-south1", "asia-southeast3", "europe-north1",
    "europe-north2", "europe-southwest1", "europe-west1", "europe-west4", "europe-west8", "europe-west9", "me-west1",
    "northamerica-south1", "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1",
    "africa-south1", "asia-east2", "asia-northeast3", "asia-southeast1", "asia-southeast2", "asia-south2",
    "australia-southeast1", "australia-southeast2", "europe-central2", "europe-west10", "europe-west12",
    "europe-west2", "europe-west3", "europe-west6", "me-central1", "northamerica-northeast1",
    "northamerica-northeast2", "southamerica-east1", "southamerica-west1", "us-west2", "us-west3", "us-west4",
)
CPUS = (1, 2, 4, 6, 8)
MEMORY_GI = (2, 4, 8, 16, 24, 32)
MAX_INSTANCES = 8  # Ray Serve's autoscaling ceiling an owner may ask for (a local endpoint is one process)
StatusName = Literal["creating", "deploying", "ready", "stopping", "stopped", "failed"]
Cpu = Literal[1, 2, 4, 6, 8]
MemoryGi = Literal[2, 4, 8, 16, 24, 32]
Slug = Field(min_length=1, max_length=100)


class DeploymentCreate(BaseModel):
    model_config = ConfigDict(extra="ignore")

    project: str = Field(min_length=1, max_length=128, description="Project of the model (the owner's)")
    model: str = Field(min_length=1, max_length=128, description="Model to serve; it needs weights")
    deployment: str = Field(min_length=1, max_length=100, description="The deployment's name in its URL (made "
                            "unique with -2, -3... when taken)")
    name: str = Field(min_length=1, max_length=200, description="Display name")
    region: str = Field(min_length=1, max_length=40, description="One of the SDK's regions the operator offers "
                        "(LANNER_DEPLOY_REGIONS)")
    cpu: Cpu | None = Field(default=None, description="vCPUs of the process or replica (default 1)")
    memoryGi: MemoryGi | None = Field(default=None, description="Memory in GiB (default 2)")
    runtime: Literal["auto", "onnx", "pytorch"] | None = Field(
        default=None, description="Lanner extension: 'auto' (default) serves an ONNX export with ONNX Runtime when "
        "the model has a completed one, else the checkpoint with PyTorch; 'onnx' requires the export")
    maxInstances: int | None = Field(default=None, ge=1, le=MAX_INSTANCES, description="Lanner extension: the "
                                     "most Ray Serve replicas autoscaling may run (a local endpoint is one process)")


class DeploymentUpdate(BaseModel):
    """Exactly one of ``metadata``, ``name`` or ``action`` (with what the action takes)."""

    model_config = ConfigDict(extra="ignore")

    metadata: JsonObject | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)
    action: Literal["start", "stop", "camera", "replace", "resize"] | None = None
    url: str | None = Field(default=None, max_length=2000)
    project: str | None = Field(default=None, min_length=1, max_length=128)
    model: str | None = Field(default=None, min_length=1, max_length=128)
    cpu: Cpu | None = None
    memoryGi: MemoryGi | None = None


def deployment_item(deployment: Deployment, *, owner: str, with_metadata: bool) -> dict[str, Any]:
    """The SDK's deployment item (``metadata`` only in ``retrieve``), plus ``runtime``."""
    item: dict[str, Any] = {
        "id": deployment.id, "owner": owner, "project": deployment.project_slug, "model": deployment.model_slug,
        "deployment": deployment.slug, "name": deployment.name, "status": deployment.status,
        "region": deployment.region,
        "resources": {"cpu": float(deployment.cpu), "memoryGi": float(deployment.memory_gi),
                      "minInstances": float(deployment.min_instances),
                      "maxInstances": float(deployment.max_instances)},
        "metered": deployment.price_micros_per_hour > 0,
        "createdAt": iso(deployment.created_at), "updatedAt": iso(deployment.updated_at),
        "runtime": deployment.runtime,
    }
    if deployment.task:
        item["task"] = deployment.task
    if deployment.status_message:
        item["statusMessage"] = deployment.status_message
    if deployment.deployed_at is not None:
        item["deployedAt"] = iso(deployment.deployed_at)
    if with_metadata:
        item["metadata"] = dict(deployment.metadata_ or {})
    return item


def service_url(public_url: str, owner: str, slug: str) -> str:
    """Where clients call the endpoint: ``{serviceUrl}/predict`` with the owner's key, as on the hosted
    platform (Lanner authenticates and forwards to the process)."""
    return f"{public_url.rstrip('/')}/api/deployments/{owner}/{slug}"
