"""What a probe needs that `pip install ncclcheck` does not bring: torch.

The plain install is light (explain, hang, checks and the probes that read the host need no
torch), so a check that does need torch, where none is installed, is a skip whose reason is
the line that installs it; a command none of whose checks could run for that reason exits 2
(``model.exit_code``). Whether torch is there is asked of the import system, not by importing
it, which costs seconds.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ncclcheck.model import INSTALL_DETAIL, CheckName, CheckResult, skipped

TORCH_INSTALL = "pip install 'ncclcheck[torch]'"


def torch_package() -> Path | None:
    """torch's package folder, found without importing it (importing costs seconds); None
    when torch is not installed, or is broken or half-removed (as good as none). The one
    place that asks whether and where torch is installed."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def torch_missing() -> str | None:
    """Why torch cannot be used here when it is not installed, naming the install line;
    None when it is installed."""
    if sys.modules.get("torch") is not None:  # imported already (or stood in for by a test)
        return None
    if torch_package() is not None:
        return None
    return (f"torch is not installed here: {TORCH_INSTALL} (or run ncclcheck in the training "
            "environment)")


def needs_torch(check: CheckName, why: str | None = None, /) -> CheckResult:
    """The skip of a check that needs torch, where none is installed."""
    reason = why or torch_missing() or "torch is not installed here"
    return skipped(check, f"skipped: {reason}", **{INSTALL_DETAIL: TORCH_INSTALL})
