"""Lightning's own messages about how a run is laid out: what pytorch-lightning (and the
lightning_fabric it ships) raise in their accelerator connector, strategies, accelerators,
cluster environments and device parsing, for an old and a current release.

Read from the sources (ast, see py_messages.py) of the installed package and of a 1.9.x wheel;
each message gets a category by the first rule of RULES its words match.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from knowledge_common import table
from py_messages import messages, package_sources

PACKAGES = ("pytorch_lightning", "lightning_fabric")
FILES = re.compile(r"^(pytorch_lightning|lightning_fabric)/(accelerators/|strategies/|"
                   r"plugins/environments/|trainer/connectors/accelerator_connector\.py|"
                   r"connector\.py|utilities/device_parser\.py|utilities/distributed\.py)")
# messages about how a run is laid out, not checkpoints, optimizers or precision
SUBJECT = re.compile(r"device|node|strateg|cluster|accelerator|gpu|cuda|rank|process|world|"
                     r"environment|launch|backend|distributed|ddp|slurm|tpu|mps|nccl|gloo|"
                     r"MASTER_|port\b|address|interactive|spawn|fork", re.I)
RULES: tuple[tuple[str, str], ...] = (
    (r"CUDA_VISIBLE_DEVICES", "duplicate_gpu"),
    (r"ntasks|num_nodes|world[_ ]size|`?devices[=`]|number of (devices|nodes|processes)|"
     r"requested (gpu|cuda|devices)|only has|node_rank|local_rank|global_rank|\branks?\b|"
     r"nnodes|nproc", "rank_mismatch"),
    (r"cuda.*not available|not available.*cuda|no (gpus|cuda)|gpu.*not available|"
     r"not compiled with cuda", "cuda"),
    (r"timed? ?out|timeout", "timeout"),
    (r"version|requires `?torch|>=|upgrade|pip install|not installed", "version_mismatch"),
    (r"MASTER_ADDR|MASTER_PORT|port", "configuration"),
)
RULE = ("by the message's words (case-insensitive), first rule wins: "
        + "; ".join(f"/{words}/ -> {cat}" for words, cat in RULES)
        + "; any other message -> configuration (Lightning raises these when the arguments, "
        "strategy, accelerator or cluster environment do not fit), except one neither raised "
        "as MisconfigurationException, ValueError nor TypeError -> other.")
MISCONFIGURATION = frozenset({"MisconfigurationException", "ValueError", "TypeError"})


def category(message: str, kind: str) -> str:
    for words, cat in RULES:
        if re.search(words, message, re.I):
            return cat
    return "configuration" if kind in MISCONFIGURATION else "other"


def lightning_version(where: Path) -> str:
    if where.suffix == ".whl":
        return where.name.split("-")[1]
    info = next(where.glob("pytorch_lightning-*.dist-info"))
    return info.name.removeprefix("pytorch_lightning-").removesuffix(".dist-info")


def lightning_table(sources: list[Path]) -> dict[str, Any]:
    entries: dict[tuple[str, str, str], dict[str, Any]] = {}
    versions = []
    for where in sources:
        version = lightning_version(where)
        versions.append(version)
        for path, source in package_sources(where, PACKAGES):
            if not FILES.search(path):
                continue
            for found in messages(source):
                if (found.kind in ("log", "warn") or len(found.template.strip()) < 10
                        or not SUBJECT.search(found.template)):
                    continue
                entry = entries.setdefault((found.template, path, found.kind), {
                    "message": found.template, "source": path, "kind": found.kind,
                    "releases": [], "category": category(found.template, found.kind)})
                if version not in entry["releases"]:
                    entry["releases"].append(version)
    rows = sorted(entries.values(), key=lambda e: (e["source"], e["message"], e["kind"]))
    return table("lightning", "lightning", "pytorch-lightning wheels: messages raised in "
                 "pytorch_lightning/ and lightning_fabric/ accelerators/, strategies/, "
                 "plugins/environments/, the accelerator connector, device_parser and "
                 "utilities/distributed, about devices, nodes, strategies, cluster environments, "
                 "accelerators, processes and backends (SUBJECT)", ", ".join(versions), RULE, rows)
