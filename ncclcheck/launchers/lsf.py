"""IBM LSF with jsrun."""

from __future__ import annotations

from typing import Mapping

from .base import EnvReader, Launcher, Layout, finish


def rankfile_hosts(path: str | None) -> list[str] | None:
    """Compute hosts from LSB_DJOB_RANKFILE, skipping the first line (the launch node), in order."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError:
        return None
    hosts: list[str] = []
    for host in lines[1:]:
        if host not in hosts:
            hosts.append(host)
    return hosts


class LsfLauncher(Launcher):
    """Processes started by jsrun under LSF.

    Reads JSM_NAMESPACE_RANK, JSM_NAMESPACE_SIZE, JSM_NAMESPACE_LOCAL_RANK, LSB_JOBID and
    LSB_DJOB_RANKFILE (one host per line; the first line is the launch node).
    """

    name = "lsf"
    title = "IBM LSF (jsrun)"
    variables: tuple[str, ...] = ("JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE",
                                   "JSM_NAMESPACE_LOCAL_RANK", "LSB_JOBID",
                                   "LSB_DJOB_RANKFILE")
    master_required = False  # Lightning derives it from the rank file

    @staticmethod
    def detect(env: Mapping[str, str]) -> str | None:
        if "JSM_NAMESPACE_SIZE" in env or "JSM_NAMESPACE_RANK" in env:
            return "JSM_NAMESPACE_* are set (jsrun under LSF)"
        if "LSB_JOBID" in env and "LSB_DJOB_RANKFILE" in env:
            return "LSB_JOBID and LSB_DJOB_RANKFILE are set (LSF job)"
        return None

    def read(self, env: EnvReader, reason: str) -> Layout:
        layout = self._layout(
            env, reason,
            rank=env.int("JSM_NAMESPACE_RANK"),
            world_size=env.int("JSM_NAMESPACE_SIZE", minimum=1),
            local_rank=env.int("JSM_NAMESPACE_LOCAL_RANK"),
            sources={"rank": "JSM_NAMESPACE_RANK", "world_size": "JSM_NAMESPACE_SIZE",
                     "local_rank": "JSM_NAMESPACE_LOCAL_RANK"},
        )
        hosts = rankfile_hosts(env.str("LSB_DJOB_RANKFILE"))
        if hosts:
            layout.num_nodes = len(hosts)
            layout.sources["num_nodes"] = "LSB_DJOB_RANKFILE"
            if layout.world_size and layout.world_size % len(hosts) == 0:
                layout.local_world_size = layout.world_size // len(hosts)
                layout.sources["local_world_size"] = "JSM_NAMESPACE_SIZE / hosts"
        self._agree(layout, env, "world_size", "JSM_NAMESPACE_SIZE", layout.world_size,
                    "WORLD_SIZE", "Set WORLD_SIZE from JSM_NAMESPACE_SIZE (or leave it unset).")
        self._agree(layout, env, "rank", "JSM_NAMESPACE_RANK", layout.rank, "RANK",
                    "Set RANK from JSM_NAMESPACE_RANK (or leave it unset).")
        return finish(layout, env)
