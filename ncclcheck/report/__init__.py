"""Renderers: every document the commands print, in every format of the one format table
(``formats``): the probe report (``table``, ``json``, ``markdown``), explain's result
(``explanation``), the check listing (``checks``); and the files written beside them (``junit``,
``prometheus``).

This file imports no renderer, so taking the format table costs nothing.
"""

from __future__ import annotations

from .formats import DEFAULT_FORMAT, FORMAT_NAMES, FORMATS, render

__all__ = ["DEFAULT_FORMAT", "FORMAT_NAMES", "FORMATS", "render"]
