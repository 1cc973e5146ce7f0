"""Shared pytest fixtures: where the build, the sources and the models are.

CTest runs these tests with FOLIO_BUILD_DIR and FOLIO_SOURCE_DIR set; run by
hand, they fall back to ./build under the repository root.
"""
import os
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("FOLIO_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = Path(os.environ.get("FOLIO_BUILD_DIR", SOURCE_DIR / "build"))


def models_dir() -> Path:
    env = os.environ.get("FOLIO_MODELS")
    return Path(env) if env else Path.home() / ".cache" / "folio" / "models"


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return BUILD_DIR


@pytest.fixture(scope="session")
def source_dir() -> Path:
    return SOURCE_DIR


def model_path(file: str) -> Path:
    """Path of a cached model; fails (or skips with FOLIO_ALLOW_MISSING_MODELS=1) when absent."""
    p = models_dir() / file
    if not p.exists():
        if os.environ.get("FOLIO_ALLOW_MISSING_MODELS") == "1":
            pytest.skip(f"{file} missing")
        pytest.fail(f"{file} is not in {models_dir()}; run: python3 scripts/fetch_models.py --all")
    return p
