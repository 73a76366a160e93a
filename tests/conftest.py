"""Shared fixtures: real models from the package registry (cached), seeded RNG."""

from __future__ import annotations

import numpy as np
import pytest

from edgeinf import zoo


@pytest.fixture(scope="session")
def model_path():
    """Function fixture: model_path("face_detection_short_range") -> cached Path."""
    return zoo.path


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)
