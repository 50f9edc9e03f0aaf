"""Writes the knowledge tables (ncclcheck/catalogue/knowledge/*.json) from the software's own
enumerations and messages, one subcommand per table; ``all`` writes every table whose source
is given. ``--check`` writes nothing and exits 1 when a committed table differs.

Usage:
  python scripts/knowledge/make_knowledge.py errno eai cuda nccl_result
  python scripts/knowledge/make_knowledge.py ibverbs --rdma-core GIT_DIR
  python scripts/knowledge/make_knowledge.py nccl_formats --nccl GIT_DIR
  python scripts/knowledge/make_knowledge.py net_plugin_formats --ofi GIT_DIR
  python scripts/knowledge/make_knowledge.py torch --torch OLD.whl --torch SITE_PACKAGES
  python scripts/knowledge/make_knowledge.py lightning --lightning OLD.whl --lightning SITE_PACKAGES

Sources: errno and eai from this Python and its C library; cuda from the toolkit at $CUDA_HOME
(default /usr/local/cuda); nccl_result from the installed nvidia-nccl wheel; ibverbs from the
installed libibverbs.so.1 and a git directory of linux-rdma/rdma-core (for verbs.h at the
library's release); nccl_formats from a git directory of NVIDIA/nccl (tags NCCL_TAGS);
net_plugin_formats from a git directory of aws/aws-ofi-nccl (tags OFI_TAGS); torch
and lightning from wheels or site-packages folders, oldest first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from knowledge_common import path_of, render, write
from knowledge_cuda import cuda_table
from knowledge_ibverbs import ibverbs_table
from knowledge_libc import eai_table, errno_table
from knowledge_lightning import lightning_table
from knowledge_nccl_formats import nccl_formats_table
from knowledge_net_plugin import net_plugin_table
from knowledge_ncclresult import nccl_result_table
from knowledge_torch import torch_table

NCCL_TAGS = ["v2.18.6-1", "v2.21.5-1", "v2.29.7-1", "v2.30.7-1"]
OFI_TAGS = ["v1.0.1", "v1.7.4-aws", "v1.9.2-aws", "v1.14.0", "v1.21.1"]
NCCL_LEVELS = ("WARN", "INFO")  # TRACE only exists in TRACE builds; add it with --levels


def builders(args: argparse.Namespace) -> dict[str, Callable[[], dict[str, Any]] | None]:
    return {
        "errno": errno_table, "eai": eai_table, "cuda": cuda_table,
        "nccl_result": nccl_result_table,
        "ibverbs": (lambda: ibverbs_table(args.rdma_core)) if args.rdma_core else None,
        "nccl_formats": (lambda: nccl_formats_table(args.nccl, args.tags, tuple(args.levels)))
        if args.nccl else None,
        "net_plugin_formats": (lambda: net_plugin_table(args.ofi, OFI_TAGS)) if args.ofi else None,
        "torch": (lambda: torch_table(args.torch)) if args.torch else None,
        "lightning": (lambda: lightning_table(args.lightning)) if args.lightning else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="+", help="table names, or all")
    parser.add_argument("--nccl", type=Path, help="git directory of NVIDIA/nccl")
    parser.add_argument("--ofi", type=Path, help="git directory of aws/aws-ofi-nccl")
    parser.add_argument("--tags", nargs="+", default=NCCL_TAGS)
    parser.add_argument("--levels", nargs="+", default=list(NCCL_LEVELS))
    parser.add_argument("--rdma-core", type=Path, help="git directory of linux-rdma/rdma-core")
    parser.add_argument("--torch", type=Path, action="append", help="torch wheel or site-packages")
    parser.add_argument("--lightning", type=Path, action="append",
                        help="pytorch-lightning wheel or site-packages")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    found = builders(args)
    names = list(found) if args.tables == ["all"] else args.tables
    stale = []
    for name in names:
        build = found.get(name)
        if build is None:
            print(f"{name}: skipped (its source is not given)", file=sys.stderr)
            continue
        data = build()
        if args.check:
            if not path_of(name).exists() or path_of(name).read_text("utf-8") != render(data):
                stale.append(name)
            continue
        path = write(data)
        print(f"{path.name}: {len(data['entries'])} entries, {path.stat().st_size} bytes")
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
