"""The report model: one result type for every check, and the report that holds them.

Every probe family returns ``CheckResult`` objects; renderers, the cluster gather and the
exit code all read the same objects, so a check means the same thing everywhere.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Protocol, Union

from ncclcheck.redact import redact_value_tree
from ncclcheck.version import __version__


class Status(str, enum.Enum):
    """Outcome of one check, ordered from best to worst by ``severity``."""

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    ERROR = "error"
    FAIL = "fail"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]


_SEVERITY = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.ERROR: 2, Status.FAIL: 2}


class Category(str, enum.Enum):
    """The failure taxonomy shared by probes and the log explainer (see docs/json-schema.md)."""

    RANK_MISMATCH = "rank_mismatch"
    INTERFACE = "interface"
    CONNECTION = "connection"
    NAME_RESOLUTION = "name_resolution"
    PORT_IN_USE = "port_in_use"
    VERSION_MISMATCH = "version_mismatch"
    NET_PLUGIN = "net_plugin"
    INFINIBAND = "infiniband"
    SHARED_MEMORY = "shared_memory"
    P2P = "p2p"
    DUPLICATE_GPU = "duplicate_gpu"
    TIMEOUT = "timeout"
    CUDA = "cuda"
    OUT_OF_MEMORY = "out_of_memory"
    RANK_CRASHED = "rank_crashed"
    CONFIGURATION = "configuration"
    DESYNC = "desync"
    DEGRADED = "degraded"
    OTHER = "other"


CATEGORIES: tuple[str, ...] = tuple(c.value for c in Category)


@dataclass
class CheckResult:
    """One check's verdict.

    ``fix`` and ``category`` are required for warn/fail/error and forced to None on pass/skip,
    so a passing check never carries a stale fix.
    """

    id: str
    status: Status
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None
    category: Category | None = None
    host: str | None = None
    rank: int | None = None
    ranks: str | None = None  # a grouped entry: the ranks it stands for
    hosts: int | None = None  # a grouped entry: how many hosts they run on

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.category is not None:
            self.category = Category(self.category)
        if self.status in (Status.PASS, Status.SKIP):
            self.fix = None
            self.category = None
        elif self.category is None:
            self.category = Category.OTHER

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        data = {"id": self.id, "status": self.status.value, "summary": self.summary,
                "details": self.details, "fix": self.fix,
                "category": self.category.value if self.category else None,
                "host": self.host, "rank": self.rank}
        if self.ranks is not None:
            data["ranks"], data["hosts"] = self.ranks, self.hosts
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CheckResult":
        return cls(
            id=data["id"],
            status=Status(data["status"]),
            summary=data["summary"],
            details=dict(data.get("details") or {}),
            fix=data.get("fix"),
            category=Category(data["category"]) if data.get("category") else None,
            host=data.get("host"),
            rank=data.get("rank"),
            ranks=data.get("ranks"),
            hosts=data.get("hosts"),
        )


class DeclaredCheck(Protocol):
    """What a result helper accepts instead of an id: a declared ``CheckSpec`` (defined in
    ncclcheck.probes.spec, which imports this module, so it is named here by its shape only)."""

    @property
    def id(self) -> str: ...


# A check as the code that reports it names it: its declaration, or an id built from one.
CheckName = Union[str, DeclaredCheck]


def check_id(check: CheckName) -> str:
    """The id a result carries. A ``.*`` declaration covers many ids, so it cannot be reported
    as such: its code names one member (``CheckSpec.member``)."""
    ident = check if isinstance(check, str) else check.id
    if ident.endswith(".*"):
        raise ValueError(f"{ident} declares a family of checks: report one of them "
                         "(CheckSpec.member)")
    return ident


def passed(check: CheckName, summary: str, /, **details: Any) -> CheckResult:
    return CheckResult(check_id(check), Status.PASS, summary, details)


def skipped(check: CheckName, summary: str, /, **details: Any) -> CheckResult:
    return CheckResult(check_id(check), Status.SKIP, summary, details)


def failed(check: CheckName, summary: str, fix: str, category: Category, /,
           **details: Any) -> CheckResult:
    return CheckResult(check_id(check), Status.FAIL, summary, details, fix, category)


def warned(check: CheckName, summary: str, fix: str, category: Category, /,
           **details: Any) -> CheckResult:
    return CheckResult(check_id(check), Status.WARN, summary, details, fix, category)


def errored(check: CheckName, summary: str, /, fix: str | None = None,
            category: Category = Category.OTHER, **details: Any) -> CheckResult:
    return CheckResult(check_id(check), Status.ERROR, summary, details,
                       fix or "Re-run with --format json and report the error text.", category)


def overall_status(results: Iterable[CheckResult]) -> str:
    """The report's status: fail when any check failed or errored, warn when any warned."""
    worst = max((r.status.severity for r in results), default=0)
    return {0: "pass", 1: "warn", 2: "fail"}[worst]


INSTALL_DETAIL = "install"  # a skip's detail naming the line that installs what it lacked


def could_not_run(results: Iterable[CheckResult]) -> str | None:
    """The install line, when no check ran because what they need is not installed here (every
    result a skip, one for that reason); None otherwise."""
    results = list(results)
    if not results or any(r.status is not Status.SKIP for r in results):
        return None
    return next((str(r.details[INSTALL_DETAIL]) for r in results
                 if r.details.get(INSTALL_DETAIL)), None)


def exit_code(results: Iterable[CheckResult], strict: bool = False) -> int:
    """0 nothing failed, 1 something failed (or warned, with --strict), 2 no check could run
    for want of an install."""
    results = list(results)
    if could_not_run(results):
        return 2
    status = overall_status(results)
    if status == "fail" or (strict and status == "warn"):
        return 1
    return 0


@dataclass
class BenchSection:
    """The report's ``bench`` object (docs/report.schema.json): nccl-tests' numbers per size."""

    backend: str
    world_size: int
    dtype: str
    iters: int
    warmup: int
    rows: list[dict[str, Any]]
    avg_busbw_gbps: float
    peak_busbw_gbps: float
    peak_bytes: int | None
    hosts: list[str]
    gpu: str | None
    nccl_version: str | None
    reference: dict[str, Any] | None
    plot: str | None = None  # the file the curve was drawn into, when one was
    isolate: dict[str, Any] | None = None  # --isolate: verdict and one line per node

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for optional in ("plot", "isolate"):
            if data[optional] is None:
                del data[optional]
        return data


@dataclass
class FamilyOutput:
    """What one probe family (or several, run in turn) produced: its checks and, for the
    benchmark, the report section it measured."""

    checks: list[CheckResult] = field(default_factory=list)
    bench: BenchSection | None = None

    @classmethod
    def of(cls, value: "FamilyOutput | Iterable[CheckResult]") -> "FamilyOutput":
        """A family may return a plain list of checks; this is the one place that accepts both."""
        if isinstance(value, FamilyOutput):
            return value
        return cls(list(value))

    def extend(self, other: "FamilyOutput") -> None:
        self.checks.extend(other.checks)
        if other.bench is not None:
            self.bench = other.bench


@dataclass
class Report:
    """What a probe command produces: the checks, the context they ran in, optional bench data.

    ``rows`` is the job-wide view of cluster mode (one aggregated row per check id): the table,
    markdown and JUnit show it, while JSON keeps every rank's check. None outside cluster mode.
    """

    checks: list[CheckResult]
    context: dict[str, Any] = field(default_factory=dict)
    bench: BenchSection | None = None
    rows: list[CheckResult] | None = None

    @property
    def status(self) -> str:
        return overall_status(self.checks)

    def headline(self) -> str:
        """The status as the table and Markdown title it: never PASS when no check ran."""
        return "NO CHECK RAN" if could_not_run(self.checks) else self.status.upper()

    def exit_code(self, strict: bool = False) -> int:
        """The one exit code every path uses: 1 when a check failed (or warned, if strict)."""
        return exit_code(self.checks, strict)

    def shown(self) -> "Report":
        """The report as people read it: cluster mode's aggregated rows, else every check."""
        if self.rows is None:
            return self
        return Report(self.rows, self.context, self.bench)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tool": "ncclcheck",
            "version": __version__,
            "status": self.status,
            "checks": [c.to_dict() for c in self.checks],
            "context": self.context,
        }
        if self.bench is not None:
            data["bench"] = self.bench.to_dict()
        return redact_value_tree(data)
