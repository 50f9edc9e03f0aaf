"""The context a log gives about its run: launch commands, NCCL settings, versions, banners.

NCCL often fails with a generic result ("unhandled system error", "internal error", "remote
process exited or there was a network error") while the cause is visible elsewhere in the log:
the launch command, the ``NCCL_X set by environment to V`` lines, the INFO lines naming the
interfaces and the version each rank loaded. Those lines are kept here (a bounded number per
run) so the inference step (infer.py) can name the likely cause and the line it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ncclcheck.ncclib.version import LOG_LINE as NCCL_VERSION_LINE

MAX_CONTEXT_LINES = 512     # context lines kept per run (settings and launch lines come early)
MAX_PER_RANK_LINES = 4096   # version and banner lines remembered per run

# Substrings that make a line worth keeping; the scanner hands on lines holding these tokens.
CONTEXT_TOKENS = (b"set by environment to", b"torchrun", b"torch.distributed.launch",
                  b"torch.distributed.run", b"deepspeed", b"accelerate launch", b"mpirun",
                  b"srun ", b"NCCL_SOCKET_IFNAME=", b"NCCL_GRAPH_FILE=", b"NCCL_TOPO_FILE=",
                  b"NCCL_IB_DISABLE=", b"NCCL_NET=", b"failed to connect to", b"#SBATCH",
                  b"--ntasks-per-node", b"--gres", b"--gpus-per-node", b" Pid ",
                  b"--gpus-per-task", b"--ntasks-per-gpu", b"--gpu-bind",
                  b"errno: 97", b"LOCAL_RANK: ", b"num_nodes", b"expandable_segments:",
                  b"MiB |")
_KEEP = re.compile(r"set by environment to|NCCL_[A-Z_]+=|--n(?:nodes|proc)|--node[_-]rank|"
                   r"Bootstrap ?: Using|NET/Socket ?: Using|NET/OFI|NET/Plugin|"
                   r"failed to connect to \[|errno: 97\b|transport/nvls\.cc:|"
                   r"--(?:gpus-per-task|ntasks-per-gpu|gpu-bind)\b|expandable_segments:\s*True")
# The network each node's NCCL chose ("Using network IB"), and whether it loaded a net plugin.
_NETWORK = re.compile(r"\bUsing network (?P<network>\w[\w/ .\-]*?)\s*$")
_PLUGIN_LOADED = re.compile(r"NET/Plugin ?: ?Loaded (?:net )?plugin|Plugin Path ?: ?\S*libnccl-net|"
                            r"Successfully loaded external plugin")
_PLUGIN_ABSENT = re.compile(r"NET/Plugin ?: ?(?:No plugin found|Could not find\b|"
                            r"Plugin load (?:\(\S+\) )?returned)|Using internal network plugin")
# nccl-tests' device table: "#  Rank  0 Group  0 Pid 1320 on node1 device  0 [0x00] ...".
_TESTS_RANK = re.compile(r"\bRank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+"
                         r"on\s+(?P<host>\S+)\s+device\b")
# nvidia-smi's process table: "|    0   N/A  N/A   2695173      C   python        871MiB |" (GPU,
# GI and CI ids on MIG-capable drivers, pid, type, name, memory); older drivers print no ids.
_SMI_PROCESS = re.compile(r"^\|?\s*(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?"
                          r"(?P<pid>\d+)\s+(?P<type>C|C\+G)\s+(?P<name>\S.*?)\s+"
                          r"(?P<memory>\d+)MiB\s*\|?\s*$")
MAX_SMI_PROCESSES = 512
# NCCL could not load libibverbs, and its socket transport runs over an IPoIB interface.
_VERBS_MISSING = re.compile(r"Failed to open libibverbs")
_SOCKET_OVER_IB = re.compile(r"NET/Socket ?: Using (?:\[\d+\]\S+ )*\[\d+\](?P<ifname>ib[\w.]*)")
_MPI_LAUNCH = re.compile(r"\b(?:mpirun|mpiexec|srun)\b")
# The address a rank's NCCL tells its peers to reach it at (bootstrap and socket transport).
_OWN_ADDRESS = re.compile(r"(?:Bootstrap ?: Using |NET/Socket ?: Using \[0\])[^\s:]+:"
                          r"(?P<address>\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:]+)<")
_LOOPBACK = re.compile(r"^(?:127\.|::1$)")
# A Slurm request (an #SBATCH line or an srun/sbatch command): tasks and GPUs per node.
_SLURM_LINE = re.compile(r"#SBATCH|\b(?:srun|sbatch|salloc)\b")
_SLURM_TASKS = re.compile(r"--ntasks-per-node[= ](?P<tasks>\d+)\b")
_SLURM_GPUS = re.compile(r"--(?:gres[= ]gpu(?::[\w.\-]+)?:|gpus-per-node[= ](?:[\w.\-]+:)?)"
                         r"(?P<gpus>\d+)\b")
# Signs that the run spans more than one node: a transport between nodes, a launch for several.
_BETWEEN_NODES = re.compile(r" via NET/|--nnodes[= ](?:\d+:)?(?:[2-9]|\d{2,})\b|"
                            r"NODE_RANK[= ][1-9]|--node[_-]rank[= ][1-9]|"
                            r"-(?:H|-host) [\w.\-]+(?::\d+)?,[\w.\-]+")
_BANNER = re.compile(r"(?:Initializing distributed|initializing ddp): GLOBAL_RANK: (?P<rank>\d+),"
                     r" MEMBER: \d+/(?P<world_size>\d+)")
# Lightning's device line, printed by every rank: "LOCAL_RANK: 1 - CUDA_VISIBLE_DEVICES: [0,1]".
_LOCAL_RANK = re.compile(r"\bLOCAL_RANK: (?P<local_rank>\d+) ?- ?CUDA_VISIBLE_DEVICES: \[(?P<devices>[^\]]*)\]")
# The job's node count as the request or the Trainer states it.
_NODES = re.compile(r"#SBATCH\s+(?:--nodes[= ]|-N ?)(?P<sbatch>\d+)\b|\bnum_nodes ?= ?(?P<trainer>\d+)\b|"
                    r"--nnodes[= ](?P<nnodes>\d+)\b(?!:)")  # not an elastic range (1:4)


def wants(message: str) -> bool:
    """Whether LogContext.feed takes anything from ``message`` (a version, a rank banner, a
    setting or launch line, a sign of several nodes, a Slurm request)."""
    return ("NCCL version" in message or "GLOBAL_RANK" in message or "LOCAL_RANK: " in message
            or "num_nodes" in message
            or bool(_KEEP.search(message) or _BETWEEN_NODES.search(message)
                    or _SLURM_LINE.search(message) or _NETWORK.search(message)
                    or _PLUGIN_LOADED.search(message) or _PLUGIN_ABSENT.search(message)
                    or _TESTS_RANK.search(message) or _MPI_LAUNCH.search(message)
                    or _VERBS_MISSING.search(message)))


@dataclass(frozen=True)
class ContextLine:
    """A line of the logs that says something about the run's setup."""

    file: str
    line: int
    text: str
    message: str

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "text": self.text[:300]}


@dataclass
class LogContext:
    """What the logs said about the run, gathered while they are read."""

    lines: list[ContextLine] = field(default_factory=list)
    versions: dict[str, ContextLine] = field(default_factory=dict)
    banners: dict[int, list[ContextLine]] = field(default_factory=dict)
    world_sizes: set[int] = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    between_nodes: bool = False
    slurm_tasks: tuple[int, ContextLine] | None = None  # the request's tasks per node, its line
    slurm_gpus: int | None = None                       # ... and its GPUs per node
    networks: dict[str, tuple[str, ContextLine]] = field(default_factory=dict)  # host -> choice
    plugins: dict[str, tuple[bool, ContextLine]] = field(default_factory=dict)  # host -> loaded?
    # nccl-tests processes (host, pid) -> their "Rank 0" line (None: announced other ranks only)
    tests_rank0: dict[tuple[str, str], ContextLine | None] = field(default_factory=dict)
    mpi_launch: bool = False
    verbs_missing: ContextLine | None = None   # NCCL could not load libibverbs
    socket_over_ib: ContextLine | None = None  # NCCL's socket transport uses an IPoIB interface
    local_ranks: list[tuple[int, ContextLine]] = field(default_factory=list)  # Lightning's lines
    nodes: int | None = None                   # the node count the request or Trainer states
    # address -> {host: its line}: where each host's NCCL said its peers can reach it
    addresses: dict[str, dict[str, ContextLine]] = field(default_factory=dict)
    # nvidia-smi's compute processes: (gpu, program) -> {pid: its line}
    gpu_processes: dict[tuple[int, str], dict[str, ContextLine]] = field(default_factory=dict)
    _remembered: int = 0

    def feed(self, file: str, line: int, text: str, message: str,
             host: str | None = None) -> None:
        """Keep ``message`` when it names a setting, a launch option, a version or a rank;
        note the host that printed it and any sign of a run across nodes."""
        if host and len(self.hosts) < 64:
            self.hosts.add(host)
        if not self.between_nodes and _BETWEEN_NODES.search(message):
            self.between_nodes = True
        if _SLURM_LINE.search(message):
            self._slurm(ContextLine(file, line, text, message))
        if not self.mpi_launch and _MPI_LAUNCH.search(message):
            self.mpi_launch = True
        if self.verbs_missing is None and "libibverbs" in message \
                and _VERBS_MISSING.search(message):
            self.verbs_missing = ContextLine(file, line, text, message)
        if self.socket_over_ib is None and "NET/Socket" in message \
                and _SOCKET_OVER_IB.search(message):
            self.socket_over_ib = ContextLine(file, line, text, message)
        if host and len(self.networks) < 64 and "Using network" in message \
                and (found := _NETWORK.search(message)):
            self.networks.setdefault(host, (found.group("network"),
                                            ContextLine(file, line, text, message)))
        if host and len(self.plugins) < 64 and "lugin" in message:
            loaded = bool(_PLUGIN_LOADED.search(message))
            if loaded or _PLUGIN_ABSENT.search(message):
                kept = self.plugins.get(host)
                if kept is None or (loaded and not kept[0]):  # a later load wins over a miss
                    self.plugins[host] = (loaded, ContextLine(file, line, text, message))
        if host and "Using" in message and (found := _OWN_ADDRESS.search(message)) \
                and len(self.addresses) < 256:
            hosts = self.addresses.setdefault(found.group("address"), {})
            if len(hosts) < 8:
                hosts.setdefault(host, ContextLine(file, line, text, message))
        if "MiB" in message and (found := _SMI_PROCESS.search(message)) \
                and sum(map(len, self.gpu_processes.values())) < MAX_SMI_PROCESSES:
            pids = self.gpu_processes.setdefault((int(found.group("gpu")), found.group("name")),
                                                 {})
            pids.setdefault(found.group("pid"), ContextLine(file, line, text, message))
        if "Pid" in message and (found := _TESTS_RANK.search(message)) \
                and len(self.tests_rank0) < MAX_PER_RANK_LINES:
            process = (found.group("host"), found.group("pid"))
            if self.tests_rank0.get(process) is None:
                self.tests_rank0[process] = (ContextLine(file, line, text, message)
                                             if found.group("rank") == "0" else None)
        if self.nodes is None and (found := _NODES.search(message)):
            self.nodes = int(next(n for n in found.groups() if n is not None))
        if "LOCAL_RANK: " in message and len(self.local_ranks) < MAX_PER_RANK_LINES \
                and (found := _LOCAL_RANK.search(message)):
            self.local_ranks.append((int(found.group("local_rank")),
                                     ContextLine(file, line, text, message)))
        if "NCCL version" in message and (found := NCCL_VERSION_LINE.search(message)):
            if len(self.versions) < 64:
                self.versions.setdefault(found.group("version"),
                                         ContextLine(file, line, text, message))
        elif "GLOBAL_RANK" in message and (found := _BANNER.search(message)):
            self._banner(int(found.group("rank")), int(found.group("world_size")),
                         ContextLine(file, line, text, message))
        elif len(self.lines) < MAX_CONTEXT_LINES and _KEEP.search(message):
            self.lines.append(ContextLine(file, line, text, message))

    def _banner(self, rank: int, world_size: int, where: ContextLine) -> None:
        if self._remembered >= MAX_PER_RANK_LINES:
            return
        self._remembered += 1
        self.banners.setdefault(rank, []).append(where)
        self.world_sizes.add(world_size)

    def duplicate_rank(self) -> ContextLine | None:
        """The second announcement of a global rank, when ranks were announced twice while
        others never were (a job restarted in the same log announces every rank again)."""
        if len(self.world_sizes) != 1:
            return None
        world_size = next(iter(self.world_sizes))
        twice = [lines[1] for lines in self.banners.values() if len(lines) > 1]
        if not twice or len(self.banners) >= world_size:
            return None
        return min(twice, key=lambda c: (c.file, c.line))

    def local_ranks_repeat(self) -> tuple[int, int, ContextLine] | None:
        """(ranks per node, the local ranks used, the repeated line) when Lightning's ranks,
        all announced, shared out fewer local ranks than each node runs processes: world size W
        over N nodes (N < W) needs local ranks 0..W/N-1 on each node, so with fewer, two
        processes on a node take the same GPU (or ask for one the node does not have)."""
        if len(self.world_sizes) != 1 or self.nodes is None or self.nodes < 1:
            return None
        world_size = next(iter(self.world_sizes))
        if world_size <= self.nodes or world_size % self.nodes or len(self.local_ranks) < world_size:
            return None
        per_node = world_size // self.nodes
        used = {local for local, _ in self.local_ranks}
        if len(used) >= per_node:
            return None
        seen: set[int] = set()
        for local, where in self.local_ranks:
            if local in seen:
                return per_node, len(used), where
            seen.add(local)
        return None

    def _slurm(self, where: ContextLine) -> None:
        if self.slurm_tasks is None and (found := _SLURM_TASKS.search(where.message)):
            self.slurm_tasks = (int(found.group("tasks")), where)
        if self.slurm_gpus is None and (found := _SLURM_GPUS.search(where.message)):
            self.slurm_gpus = int(found.group("gpus"))

    def slurm_tasks_over_gpus(self) -> tuple[int, int, ContextLine] | None:
        """(tasks per node, GPUs per node, the tasks line) when a Slurm request starts more
        tasks on a node than it gives the node GPUs."""
        if self.slurm_tasks is None or self.slurm_gpus is None:
            return None
        tasks, where = self.slurm_tasks
        return (tasks, self.slurm_gpus, where) if tasks > self.slurm_gpus > 0 else None

    def one_host(self) -> bool:
        """Whether nothing in the log shows a second node (at most one host printed lines,
        no transport between nodes, no launch across nodes)."""
        return len(self.hosts) <= 1 and not self.between_nodes

    def differing_versions(self) -> tuple[ContextLine, ContextLine] | None:
        """Two lines where ranks report different NCCL versions, in reading order."""
        if len(self.versions) < 2:
            return None
        first, second = sorted(self.versions.values(), key=lambda c: (c.file, c.line))[:2]
        return first, second

    def differing_networks(self) -> tuple[str, str, ContextLine, ContextLine] | None:
        """Two nodes whose NCCL chose different networks ("Using network IB" on one, "Socket"
        on another) or of which only one loaded a net plugin: (first choice, second choice,
        their lines), in reading order."""
        for kept, name in ((self.networks, str), (self.plugins, _plugin_name)):
            choices = sorted(kept.values(), key=lambda c: (c[1].file, c[1].line))
            for choice, where in choices[1:]:
                if choice != choices[0][0]:
                    return name(choices[0][0]), name(choice), choices[0][1], where
        return None

    def shared_address(self) -> tuple[str, ContextLine, ContextLine] | None:
        """(address, the first host's line, the second's) when two hosts' NCCL tell their peers
        the same address (not a loopback one, which bootstrap_virtual_interface reads): each is
        reachable at an address that is private to its own host, a container's or a NAT's."""
        for address, hosts in self.addresses.items():
            if len(hosts) >= 2 and not _LOOPBACK.match(address):
                first, second = sorted(hosts.values(), key=lambda c: (c.file, c.line))[:2]
                return address, first, second
        return None

    def ib_without_verbs(self) -> tuple[ContextLine, ContextLine] | None:
        """(the libibverbs line, the socket line) when NCCL could not load libibverbs while its
        socket transport runs over an InfiniBand interface: IB is there, NCCL cannot use it."""
        if self.verbs_missing is None or self.socket_over_ib is None:
            return None
        return self.verbs_missing, self.socket_over_ib

    def gpu_shared_by_one_program(self) -> tuple[int, str, int, ContextLine] | None:
        """(GPU, program, its processes there, the second one's line) when nvidia-smi shows
        several processes of one program holding a CUDA context on the same GPU: ranks that
        share it, or ranks that made a context there besides their own GPU's (a CUDA call
        before torch.cuda.set_device lands on device 0)."""
        for (gpu, name), pids in sorted(self.gpu_processes.items()):
            if len(pids) > 1:
                second = sorted(pids.values(), key=lambda c: (c.file, c.line))[1]
                return gpu, name, len(pids), second
        return None

    def tests_ranks_alone(self) -> ContextLine | None:
        """The second nccl-tests process announcing itself as rank 0 when every process did:
        each ran alone (a test binary built without MPI support) instead of as one job. Two
        processes on one host count only under an MPI or Slurm launch (else they may be two
        runs of the same test)."""
        if len(self.tests_rank0) < 2 or None in self.tests_rank0.values():
            return None
        if len({host for host, _ in self.tests_rank0}) < 2 and not self.mpi_launch:
            return None
        zeros = sorted((c for c in self.tests_rank0.values() if c is not None),
                       key=lambda c: (c.file, c.line))
        return zeros[1]


def _plugin_name(loaded: bool) -> str:
    return "an external net plugin" if loaded else "NCCL's internal network"
