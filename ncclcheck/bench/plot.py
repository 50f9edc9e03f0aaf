"""--plot FILE: busbw against message size, drawn with matplotlib (the optional `plot` extra)."""

from __future__ import annotations

from typing import Any

PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def plot_missing_reason() -> str | None:
    """Why --plot cannot work here, or None."""
    try:
        import matplotlib  # noqa: F401  # deferred: optional extra, a quarter second to import
    except Exception:
        return "--plot needs matplotlib: pip install 'ncclcheck[plot]'"
    return None


def draw(bench: dict[str, Any], path: str) -> None:
    import matplotlib  # deferred: optional extra, a quarter second to import; only --plot
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: after choosing the Agg backend

    rows = bench.get("rows", [])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["bytes"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o",
            label=f"{bench['backend']}, {bench['world_size']} ranks, {bench.get('dtype', '')}")
    reference = bench.get("reference")
    if reference:
        ax.axhline(reference["busbw_gbps"], linestyle="--", color="grey",
                   label=f"reference: {reference['title']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("ncclcheck all-reduce sweep")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
