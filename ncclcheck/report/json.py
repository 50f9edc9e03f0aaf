"""JSON: exactly one document, shaped as docs/json-schema.md describes."""

from __future__ import annotations

import json

from ncclcheck.model import Report


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str)
