"""torch.cuda.nccl.version(), the NCCL torch itself loads, against the library inspected."""

from __future__ import annotations

from ncclcheck.model import Category, CheckResult, passed, skipped, warned
from ncclcheck.ncclib.gpu import torch_build_without_cuda
from ncclcheck.ncclib.loader import LibraryAnswer
from ncclcheck.ncclib.version import from_torch_tuple
from ncclcheck.needs import needs_torch, torch_missing
from ncclcheck.probes.nccl.facts import NcclFacts
from ncclcheck.probes.spec import CheckSpec, judge


TORCH_VERSION = CheckSpec(
    "nccl.torch_version", "torch.cuda.nccl.version() matches the library",
    (Category.VERSION_MISMATCH,),
    warns_when="torch reports another NCCL version than the library inspected",
    order=50)


@judge(TORCH_VERSION)
def judge_torch_version(facts: NcclFacts) -> CheckResult:
    return check_torch_nccl(facts.answer)


def check_torch_nccl(answer: LibraryAnswer | None) -> CheckResult:
    """torch.cuda.nccl.version() is the NCCL torch itself loads; it must match ours."""
    cpu_build = torch_build_without_cuda()
    if cpu_build is not None:
        return skipped(TORCH_VERSION, f"skipped: {cpu_build} is a CPU-only build: it has "
                       "no NCCL to compare", torch=cpu_build)
    missing = torch_missing()
    if missing:
        return needs_torch(TORCH_VERSION, missing)
    try:
        import torch  # deferred: seconds to import; a CPU-only build was ruled out above
    except Exception as exc:
        return skipped(TORCH_VERSION,
                       f"skipped: torch does not import ({type(exc).__name__})")
    if torch.version.cuda is None:
        return skipped(TORCH_VERSION, f"skipped: torch {torch.__version__} is a CPU-only "
                       "build: it has no NCCL to compare", torch=torch.__version__)
    try:
        theirs = from_torch_tuple(torch.cuda.nccl.version())
    except Exception as exc:
        return skipped(TORCH_VERSION, f"skipped: torch.cuda.nccl.version() failed: {exc}")
    ours = answer.version if answer else None
    if theirs is None or ours is None:
        return skipped(TORCH_VERSION, "skipped: one of the two versions is unknown",
                       torch_nccl=str(theirs) if theirs else None)
    if theirs != ours:
        return warned(TORCH_VERSION, f"torch reports NCCL {theirs}, the library found "
                      f"here is {ours}", "Check LD_PRELOAD / LD_LIBRARY_PATH: torch loads a "
                      "different libnccl than the one inspected; pass it with --nccl-lib.",
                      Category.VERSION_MISMATCH, torch_nccl=str(theirs), inspected=str(ours))
    return passed(TORCH_VERSION, f"torch.cuda.nccl.version() agrees: {theirs}",
                  torch_nccl=str(theirs))
