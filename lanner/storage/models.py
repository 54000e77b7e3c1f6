"""Upload sessions: the SDK's signed-URL upload flow for dataset archives and model checkpoints."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, String, false
from sqlalchemy.orm import Mapped, mapped_column

from lanner.db import Base, TimestampMixin, id_column


class UploadSession(TimestampMixin, Base):
    """A signed-URL upload (``upload.signed_url`` → PUT → ``upload.complete``) of a dataset or model file."""

    __tablename__ = "upload_sessions"

    id: Mapped[str] = id_column()
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    asset_type: Mapped[str] = mapped_column(String(20))
    asset_id: Mapped[str | None] = mapped_column(String(32))
    filename: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str | None] = mapped_column(String(100))
    total_bytes: Mapped[int | None] = mapped_column(BigInteger)
    sha256: Mapped[str | None] = mapped_column(String(64), index=True)  # cleared once the file is not needed
    size: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    expires_at: Mapped[datetime | None]  # the upload URL's end; an unfinished session is expired after it
    # The file waits at the slot's staging key in the bucket, its size checked but not hashed yet (``sha256`` is
    # None until ``upload_sessions.settle`` files it by digest): nothing may delete those bytes meanwhile.
    staged: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false(), index=True)
