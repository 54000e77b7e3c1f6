"""Wire shapes of storage integrations (the SDK's ``StorageIntegrations*`` types). No response shape has a
field for credentials: they go in, sealed, and never come out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Provider = Literal["s3", "gcs", "azure"]


class CreateIntegration(BaseModel):
    provider: Provider
    # s3: accessKeyId, secretAccessKey (sessionToken); gcs: serviceAccountKey; azure: accountName, accountKey.
    # Lanner: endpoint (an S3-compatible server, a GCS or Azure emulator) and region, also here.
    credentials: dict[str, Any] = Field(max_length=10)
    targets: list[str] = Field(min_length=1, max_length=100)


class DiscoverRequest(BaseModel):
    provider: Provider
    credentials: dict[str, Any] = Field(max_length=10)


class UpdateIntegration(BaseModel):
    processing: bool


class BucketImportRequest(BaseModel):
    """Lanner: index ``target``/``prefix`` into the dataset in place (pixels stay in the bucket)."""

    integrationId: str = Field(max_length=32)
    target: str = Field(max_length=255)
    prefix: str = Field(default="", max_length=1024)
