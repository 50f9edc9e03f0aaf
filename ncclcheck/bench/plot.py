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


def pair_matrix(isolate: dict[str, Any]) -> tuple[list[str], list[list[float | None]]]:
    """Hosts (in first-rank order, as the per-node lines) and the busbw of each pair tested
    (the lowest when a pair was tested twice; None where a pair was never tested)."""
    hosts = [line["host"] for line in isolate.get("per_node", [])] or sorted(
        {p[k] for p in isolate.get("pairs", []) for k in ("a", "b")})
    index = {h: i for i, h in enumerate(hosts)}
    matrix: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
    for test in isolate.get("pairs", []):
        a, b = index[test["a"]], index[test["b"]]
        old = matrix[a][b]
        value = test["busbw_gbps"] if old is None else min(old, test["busbw_gbps"])
        matrix[a][b] = matrix[b][a] = value
    return hosts, matrix


def draw(bench: dict[str, Any], path: str, isolate: dict[str, Any] | None = None) -> None:
    """The busbw curve; with ``isolate`` (bench.isolate's details plus the per-node lines)
    a second panel: the pair matrix as a heat map, slow nodes and links marked."""
    import matplotlib  # deferred: optional extra, a quarter second to import; only --plot
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: after choosing the Agg backend

    rows = bench.get("rows", [])
    if isolate:
        fig, (ax, heat) = plt.subplots(1, 2, figsize=(13, 5))
        _heat_map(fig, heat, isolate)
    else:
        fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["bytes"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o",
            label=f"{bench['backend']}, {bench['world_size']} ranks, {bench.get('dtype', '')}")
    reference = bench.get("reference")
    if reference:
        ax.axhline(reference["busbw_gbps"], linestyle="--", color="grey",
                   label=f"expected: {reference['title']}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("ncclcheck all-reduce sweep")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _heat_map(fig: Any, ax: Any, isolate: dict[str, Any]) -> None:
    hosts, matrix = pair_matrix(isolate)
    grid = [[float("nan") if v is None else v for v in row] for row in matrix]
    image = ax.imshow(grid, cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax, label="pair busbw (GB/s)")
    if len(hosts) <= 64:
        ax.set_xticks(range(len(hosts)), hosts, rotation=90, fontsize="small")
        ax.set_yticks(range(len(hosts)), hosts, fontsize="small")
    slow = set(isolate.get("slow_nodes", []))
    for i, host in enumerate(hosts):
        if host in slow:
            ax.axhline(i, color="red", linewidth=0.8)
            ax.axvline(i, color="red", linewidth=0.8)
    index = {h: i for i, h in enumerate(hosts)}
    for a, b in isolate.get("slow_links", []):
        ax.plot([index[a], index[b]], [index[b], index[a]], "rx", markersize=10)
    ax.set_title(f"pair tests (--isolate {isolate.get('mode')}): "
                 f"{isolate.get('rounds')} rounds, slow below "
                 f"{isolate.get('slow_below_gbps', 0):.3g} GB/s")
