"""Wire shapes of the SDK's ``upload.*`` calls."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import BigCount


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SignedUrlRequest(_Body):
    assetType: str
    assetId: str | None = None
    filename: str = Field(min_length=1, max_length=255)
    contentType: str | None = Field(default=None, max_length=100)
    totalBytes: BigCount | None = None


class UploadCompleteRequest(_Body):
    sessionId: str = Field(min_length=1)
    checksum: str | None = None
    md5: str | None = None
