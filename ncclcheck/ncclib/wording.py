"""Fix texts shared with the log explainer: a problem found before a run reads the same as the
same problem found in a failed run's log (``ncclcheck.explain.catalogue``)."""

from __future__ import annotations

from typing import Any, Mapping


def catalogue_fix(signature_id: str, fallback: str, here: str = "",
                  facts: Mapping[str, Any] | None = None) -> str:
    """The catalogue's fix for ``signature_id`` followed by ``here`` (this host's specifics);
    ``fallback`` when the catalogue lacks the signature."""
    try:
        from ncclcheck.explain.catalogue import signature
        text = signature(signature_id).render(dict(facts or {}))[1].strip()
    except Exception:  # the catalogue is shared wording; a check stands without it
        text = ""
    text = text or fallback
    return f"{text} {here}".strip() if here else text
