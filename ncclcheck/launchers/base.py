"""The interface every launcher implements, and the typed reading of its environment."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Mapping


@dataclass
class EnvProblem:
    """A rank-related variable that is present but unusable."""

    name: str
    value: str
    problem: str

    def describe(self) -> str:
        return f"{self.name}={self.value!r} {self.problem}"


class EnvReader:
    """Reads integers out of an environment, remembering every malformed value it met.

    Launchers read through it so that one bad variable becomes one clear finding instead of
    a ValueError half-way through the probe.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[EnvProblem] = []
        self.read: dict[str, str] = {}

    def has(self, name: str) -> bool:
        return name in self.env

    def str(self, name: str) -> str | None:
        value = self.env.get(name)
        if value is None:
            return None
        self.read[name] = value
        if not value.strip():
            self._problem(name, value, "is set but empty")
            return None
        return value.strip()

    def int(self, name: str, minimum: int = 0, maximum: int | None = None) -> int | None:
        value = self.str(name)
        if value is None:
            return None
        try:
            number = int(value, 10)
        except ValueError:
            self._problem(name, value, "is not an integer")
            return None
        if number < minimum or (maximum is not None and number > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            self._problem(name, value, f"is out of range (must be {bound})")
            return None
        return number

    def _problem(self, name: str, value: str, problem: str) -> None:
        if not any(p.name == name for p in self.problems):
            self.problems.append(EnvProblem(name, value, problem))


@dataclass
class Agreement:
    """Two readings of the same quantity that must be equal (e.g. SLURM_NTASKS vs WORLD_SIZE)."""

    quantity: str
    left: str
    left_value: int
    right: str
    right_value: int
    fix: str

    @property
    def ok(self) -> bool:
        return self.left_value == self.right_value

    def describe(self) -> str:
        relation = "==" if self.ok else "!="
        return f"{self.left}={self.left_value} {relation} {self.right}={self.right_value}"


@dataclass(frozen=True)
class LaunchAdvice:
    """A launch that runs but not as the job needs: what is wrong, how bad, and the fix."""

    fails: bool  # True: the launch cannot train correctly; False: a warning
    note: str
    fix: str


@dataclass
class Layout:
    """What a launcher says about this process: its place in the job and the job's shape."""

    launcher: str
    title: str
    reason: str
    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    local_world_size: int | None = None
    node_rank: int | None = None
    num_nodes: int | None = None
    master_addr: str | None = None
    master_port: int | None = None
    sources: dict[str, str] = field(default_factory=dict)
    agreements: list[Agreement] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    rank_formula_guaranteed: bool = False
    master_required: bool = True
    problems: list[EnvProblem] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    single_process: bool = False  # no launcher: this process is the whole job
    agent_holds_master_port: bool = False  # the launcher's own agent listens on MASTER_PORT
    advice: LaunchAdvice | None = None

    def default_store_port(self) -> int | None:
        """The port for ncclcheck's report store: MASTER_PORT, or its neighbour when the
        launcher's agent already listens there."""
        if self.master_port is None:
            return None
        if not self.agent_holds_master_port:
            return self.master_port
        return self.master_port + 1 if self.master_port < 65535 else self.master_port - 1

    def source(self, quantity: str) -> str:
        """The variable a quantity came from, for messages ("WORLD_SIZE", "SLURM_NTASKS")."""
        return self.sources.get(quantity, quantity.upper())


class Launcher(ABC):
    """One launcher: how to recognise it and how to read its variables.

    Subclasses list the variables they read in their docstring, keep ``detect`` free of side
    effects, and return a ``Layout`` from ``read``.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    rank_formula_guaranteed: ClassVar[bool] = False
    master_required: ClassVar[bool] = True
    single_process: ClassVar[bool] = False
    agent_holds_master_port: ClassVar[bool] = False

    @staticmethod
    @abstractmethod
    def detect(env: Mapping[str, str]) -> str | None:
        """The reason this launcher is recognised (which variables), or None."""

    @abstractmethod
    def read(self, env: EnvReader, reason: str) -> Layout:
        """Read the launcher's variables into a Layout."""

    def _layout(self, env: EnvReader, reason: str, **fields) -> Layout:
        layout = Layout(self.name, self.title, reason,
                        rank_formula_guaranteed=self.rank_formula_guaranteed,
                        master_required=self.master_required, single_process=self.single_process,
                        agent_holds_master_port=self.agent_holds_master_port, **fields)
        layout.master_addr = env.str("MASTER_ADDR")
        layout.master_port = env.int("MASTER_PORT", minimum=1, maximum=65535)
        return layout

    @staticmethod
    def _agree(layout: Layout, env: EnvReader, quantity: str, own: str, own_value: int | None,
               generic: str, fix: str) -> None:
        """Compare a launcher variable with the generic torch variable when both are set."""
        generic_value = env.int(generic, minimum=1 if quantity == "world_size" else 0)
        if own_value is not None and generic_value is not None:
            layout.agreements.append(Agreement(quantity, own, own_value, generic, generic_value, fix))


def finish(layout: Layout, env: EnvReader) -> Layout:
    """Attach what the reader saw (values and problems) to the layout."""
    layout.problems = list(env.problems)
    layout.variables = dict(env.read)
    return layout
