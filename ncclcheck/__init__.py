"""ncclcheck: preflight and post-mortem diagnostics for multi-node PyTorch training over NCCL."""

__version__ = "0.1.0"

__all__ = ["__version__", "CheckResult", "Category", "Report", "Status", "ProbeContext",
           "ProbeOptions", "Request", "Output", "Outcome", "check", "run_checks"]


def __getattr__(name: str):
    # Keep `import ncclcheck` cheap: the public names load on first use.
    if name in ("CheckResult", "Category", "Report", "Status"):
        from ncclcheck import model
        return getattr(model, name)
    if name in ("ProbeContext", "ProbeOptions"):
        from ncclcheck import context
        return getattr(context, name)
    if name in ("Request", "Output", "Outcome", "check", "run_checks"):
        from ncclcheck import runner
        return getattr(runner, name)
    raise AttributeError(name)
