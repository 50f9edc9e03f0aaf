"""The cycle collector paused while many small objects are built that all stay alive.

Reading a large job's reports or its flight-recorder dumps makes hundreds of thousands to
millions of objects and frees none of them: the collector would only rescan them, again and
again (it doubles the time), so it waits until the reading is done.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """Collection off for the block, back on after it if it was on before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
