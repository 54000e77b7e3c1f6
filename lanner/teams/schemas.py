"""Wire shapes of the team endpoints (camelCase like the SDK's; the SDK itself has no team endpoints yet)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from lanner.bounds import BigCount
from lanner.teams.permissions import ROLES

Role = Annotated[str, Field(pattern=f"^({'|'.join(ROLES)})$")]


class TeamCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=40)
    fullName: str = Field(default="", max_length=200)


class MemberAdd(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=64)
    role: Role = "viewer"


class MemberUpdate(BaseModel):
    """A new role, a monthly budget (cents of the team's credit per calendar month; null: no limit), or both."""

    model_config = ConfigDict(extra="forbid")

    role: Role | None = None
    monthlyBudgetCents: BigCount | None = None
    clearBudget: bool = False


class InvitationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = "viewer"
    days: int = Field(default=7, ge=1, le=30)


class InvitationAccept(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=100)


class TeamFunding(BaseModel):
    """Credit an admin gives the team from their own available credit, in cents."""

    model_config = ConfigDict(extra="forbid")

    amountCents: int = Field(gt=0, le=100_000_000)
