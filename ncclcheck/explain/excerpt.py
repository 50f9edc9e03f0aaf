"""The part of a matched line a finding shows: the text around the match, so a huge single line
(a 20 MB log without newlines) still shows what matched, not its first kilobytes."""

from __future__ import annotations

from typing import Any

MAX_EXCERPT = 2000  # characters a finding keeps of its line
LEAD = 120          # characters kept before the match, for context
ELLIPSIS = "…"


def excerpt(text: str, signature: Any) -> str:
    """``text`` stripped, or, when longer than MAX_EXCERPT, the window that starts a little
    before where ``signature`` matches it, marked with an ellipsis at the cut ends."""
    text = text.strip()
    if len(text) <= MAX_EXCERPT:
        return text
    start = 0
    for pattern in signature.compiled:
        found = pattern.search(text)
        if found:
            start = max(0, found.start() - LEAD)
            break
    end = min(len(text), start + MAX_EXCERPT)
    start = max(0, end - MAX_EXCERPT)
    return (ELLIPSIS if start else "") + text[start:end] + (ELLIPSIS if end < len(text) else "")
