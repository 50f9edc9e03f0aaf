"""What `explain` finds in a log written by a test: one helper for the message-family tests."""

from __future__ import annotations

from pathlib import Path

from ncclcheck.explain.engine import explain


def findings_of(tmp_path: Path, text: str, *, lines_only: bool = False) -> list[dict]:
    """The findings of ``text`` as a log, root cause first; with ``lines_only``, without the
    causes inferred from the rest of the log (context or keywords)."""
    path = tmp_path / "job.log"
    path.write_text(text + "\n", "utf-8")
    findings = explain([str(path)]).to_dict()["findings"]
    return [f for f in findings if not (lines_only and f["inferred_from"])]


def ids_of(tmp_path: Path, text: str, *, lines_only: bool = False) -> list[str]:
    """The ids of ``findings_of``."""
    return [f["id"] for f in findings_of(tmp_path, text, lines_only=lines_only)]
