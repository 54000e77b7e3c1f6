"""The owned resource: a row one user owns, addressed as ``owner/slug``, public or private.

Datasets and projects are both such a resource. Their shared columns, their PATCH (rename, visibility and the
plain descriptive fields) and the fields a create request shares are written here once, so the two domains
cannot drift apart. This module knows no domain: it stands on ``db``, ``errors``, ``slugs`` and ``bounds`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import ForeignKey, String, Text, UniqueConstraint, select
from sqlalchemy.orm import Mapped, Session, declared_attr, mapped_column

from lanner.bounds import TEXT_MAX_CHARS, JsonObject, StoredJson
from lanner.db import TimestampMixin, id_column
from lanner.errors import BadRequest
from lanner.slugs import renamed_slug

VISIBILITIES = ("public", "private")

# PATCH body key -> attribute, for the fields every owned resource has and that need no checks.
PLAIN_FIELDS = {"description": "description", "tags": "tags", "license": "license", "metadata": "metadata_"}


class OwnedResource(TimestampMixin):
    """Columns of an owned, slugged resource; a table using it is unique on ``(owner_id, slug)``."""

    id: Mapped[str] = id_column()
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    slug: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    visibility: Mapped[str] = mapped_column(String(10), default="private")
    tags: Mapped[list[Any]] = mapped_column(default=list)
    license: Mapped[str | None] = mapped_column(String(40))
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    # Why Lanner made it, when no person did: "assistant" (a labelling assistant's working dataset and project),
    # "pretraining" (what the demo's starting model learned from). Such rows stay out of lists (the pages, the
    # train dialog, datasets.list / projects.list) and are reached from what made them.
    purpose: Mapped[str | None] = mapped_column(String(20))

    @declared_attr.directive
    def __table_args__(cls) -> tuple[Any, ...]:  # a constraint object belongs to one table: one per class
        return (UniqueConstraint("owner_id", "slug"),)


class OwnedResourceCreate(BaseModel):
    """What creating any owned resource accepts; each domain adds its own fields (slug, task, ...)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=200)
    owner: str | None = Field(default=None, max_length=64)
    description: str = Field(default="", max_length=TEXT_MAX_CHARS)
    visibility: str = "private"
    tags: Annotated[list[str], StoredJson] | None = None
    license: str | None = Field(default=None, max_length=40)
    metadata: JsonObject | None = None


class OwnedResourceUpdate(BaseModel):
    """What a PATCH of any owned resource may change (``apply_changes``): each field bounded by its column, so
    a hostile value is a 422 naming the field; a null or absent field is left as it is."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = Field(default=None, max_length=TEXT_MAX_CHARS)
    visibility: str | None = None
    tags: Annotated[list[str], StoredJson] | None = None
    license: str | None = Field(default=None, max_length=40)
    metadata: JsonObject | None = None

    def changes(self) -> dict[str, Any]:
        """The fields the request sent, for ``apply_changes`` and the domains' own updates."""
        return self.model_dump(exclude_unset=True)


def check_visibility(visibility: str) -> str:
    if visibility not in VISIBILITIES:
        raise BadRequest(f"visibility must be one of {', '.join(VISIBILITIES)}")
    return visibility


def apply_changes(session: Session, row: OwnedResource, changes: Mapping[str, Any], *, what: str, where: str,
                  fields: Mapping[str, str] | None = None) -> None:
    """Apply the shared part of a PATCH to ``row``: a ``name`` renames it (its slug follows, so its URL changes,
    as on the hosted platform), ``visibility`` is checked, and each plain field (``PLAIN_FIELDS`` plus the
    domain's own ``fields``) is set when present and not null. ``what``/``where`` word the conflict message."""
    table = type(row)
    if changes.get("name") is not None:
        row.slug = renamed_slug(
            changes["name"], row.slug, what=what, where=where,
            taken=lambda slug: session.scalar(select(table.id).where(
                table.owner_id == row.owner_id, table.slug == slug)) is not None)
        row.name = changes["name"]
    if changes.get("visibility") is not None:
        row.visibility = check_visibility(changes["visibility"])
    for key, attr in {**PLAIN_FIELDS, **(fields or {})}.items():
        if changes.get(key) is not None:
            setattr(row, attr, changes[key])


class TransferRequest(BaseModel):
    """Move a dataset or project to another workspace (``lanner.teams.transfers``)."""

    model_config = ConfigDict(extra="forbid")

    owner: str = Field(min_length=1, max_length=100, description="The workspace it moves to: a team's name, or "
                       "your username to bring it back")
