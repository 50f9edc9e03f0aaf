"""Shared helpers for the human-readable renderers."""

from __future__ import annotations

from typing import Any

ICONS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "error": "ERROR", "skip": "skip"}


def where(check: dict[str, Any]) -> str:
    parts = []
    if check.get("host"):
        parts.append(str(check["host"]))
    if check.get("rank") is not None:
        parts.append(f"rank {check['rank']}")
    return " ".join(parts)


def context_line(data: dict[str, Any]) -> str:
    ctx = data.get("context", {})
    keys = ("host", "rank", "launcher", "python", "torch")
    return " · ".join(f"{k} {ctx[k]}" for k in keys if ctx.get(k))


def counts_line(data: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for check in data["checks"]:
        counts[check["status"]] = counts.get(check["status"], 0) + 1
    order = ("pass", "warn", "fail", "error", "skip")
    return ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s))


def single_origin(data: dict[str, Any]) -> bool:
    """True when every check comes from one host and rank (no need for a 'where' column)."""
    hosts = {c.get("host") for c in data["checks"]}
    ranks = {c.get("rank") for c in data["checks"]} - {None}
    return len(hosts) <= 1 and len(ranks) <= 1


def grouped_fixes(data: dict[str, Any]) -> list[tuple[list[dict[str, Any]], str]]:
    """Checks that did not pass, grouped by identical fix text (one fix, printed once)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in data["checks"]:
        if c["status"] in ("fail", "error", "warn") and c["fix"]:
            groups.setdefault(c["fix"], []).append(c)
    return [(checks, fix) for fix, checks in groups.items()]
