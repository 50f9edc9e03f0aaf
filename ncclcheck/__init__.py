"""ncclcheck: preflight and post-mortem diagnostics for multi-node PyTorch training over NCCL."""

from ncclcheck.version import __version__

__all__ = ["__version__", "CheckResult", "Category", "Report", "Status", "ProbeContext",
           "ProbeOptions", "Request", "Output", "Outcome", "check", "run_checks"]


def __getattr__(name: str):
    # Keep `import ncclcheck` cheap: this file runs before every submodule (`ncclcheck explain`
    # included), so the public names load on first use.
    if name in ("CheckResult", "Category", "Report", "Status"):
        from ncclcheck import model  # deferred: loaded on first use of these names
        return getattr(model, name)
    if name in ("ProbeContext", "ProbeOptions"):
        from ncclcheck import context  # deferred: loaded on first use of these names
        return getattr(context, name)
    if name in ("Request", "Output", "Outcome", "check", "run_checks"):
        from ncclcheck import runner  # deferred: the runner loads every probe family's machinery
        return getattr(runner, name)
    raise AttributeError(name)
