"""Wire shapes for accounts."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LoginRequest(BaseModel):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=1000)


class ApiKeyCreate(BaseModel):
    name: str = Field(default="default", min_length=1, max_length=100)


class PasswordChange(BaseModel):
    currentPassword: str = Field(min_length=1, max_length=1000)
    newPassword: str = Field(min_length=1, max_length=1000)


class FollowRequest(BaseModel):
    """``account.follow``: follow (``followed: true``) or unfollow a user or team."""

    username: str = Field(min_length=1, max_length=100)
    followed: bool
