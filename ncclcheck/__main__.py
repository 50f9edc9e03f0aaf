"""`python -m ncclcheck`."""

import importlib.util
import sys
from pathlib import Path


def _unshadow_package() -> None:
    """Make ``ncclcheck`` this package even when a namespace package took its name.

    Under an editable install (``pip install -e .``), running ``python -m ncclcheck`` from the
    folder that holds the clone puts that folder first on sys.path, so the clone's own directory
    (``ncclcheck/``, no __init__.py) is imported as an empty namespace package before the
    editable finder is asked, and ``from ncclcheck import __version__`` fails. The current
    directory stays on sys.path (``--cluster-env MODULE:CLASS`` imports from it); only the
    package is loaded from this file's folder in place of the namespace.
    """
    package = sys.modules.get("ncclcheck")
    if package is None or getattr(package, "__file__", None) is not None:
        return
    here = Path(__file__).resolve().parent
    spec = importlib.util.spec_from_file_location(
        "ncclcheck", here / "__init__.py", submodule_search_locations=[str(here)])
    if spec is None or spec.loader is None:
        return
    real = importlib.util.module_from_spec(spec)
    sys.modules["ncclcheck"] = real
    spec.loader.exec_module(real)


_unshadow_package()

from ncclcheck.cli import main  # noqa: E402  (after the package is the real one)

if __name__ == "__main__":
    main()
