"""Compile the tiny C libraries of tests/plugins with gcc into a test's temporary directory."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCES = Path(__file__).parent


def require_gcc() -> None:
    """Skip without gcc locally; under CI=true a missing gcc is a broken set-up, so fail."""
    if shutil.which("gcc"):
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true but gcc is not installed (scripts/test.sh installs it)")
    pytest.skip("gcc is not installed")


def gcc(source: str, out: Path, *flags: str) -> Path:
    """Build tests/plugins/<source> as the shared object ``out``; extra gcc ``flags`` last."""
    require_gcc()
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-o", str(out), str(SOURCES / source),
                    *flags], check=True, capture_output=True, text=True, timeout=60)
    return out
