"""Model profiles shared by the profile and memory tests (building one takes a fraction of a second)."""

from __future__ import annotations

import pytest

from lanner.gpus.profile import ModelProfile, model_profile


@pytest.fixture(scope="module")
def n() -> ModelProfile:
    return model_profile("yolo11n.yaml")


@pytest.fixture(scope="module")
def s() -> ModelProfile:
    return model_profile("yolo11s.yaml")
