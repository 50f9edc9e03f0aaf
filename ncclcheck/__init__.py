"""ncclcheck: preflight and post-mortem diagnostics for multi-node PyTorch training over NCCL."""

__version__ = "0.1.0"

__all__ = ["__version__", "CheckResult", "Category", "Report", "Status", "ProbeContext",
           "run_checks"]


def __getattr__(name: str):
    # Keep `import ncclcheck` cheap: the public names load on first use.
    if name in ("CheckResult", "Category", "Report", "Status"):
        from ncclcheck import model
        return getattr(model, name)
    if name == "ProbeContext":
        from ncclcheck.context import ProbeContext
        return ProbeContext
    if name == "run_checks":
        from ncclcheck.runner import run_checks
        return run_checks
    raise AttributeError(name)
