"""Will a hang leave evidence? The flight recorder's settings, checked before the job.

A hung job's logs do not say which rank never arrived; the flight recorder's dumps do
(`ncclcheck explain` reads them). They exist only when the ring buffer records
(TORCH_FR_BUFFER_SIZE, formerly TORCH_NCCL_TRACE_BUFFER_SIZE), the watchdog dumps it on a
timeout (TORCH_NCCL_DUMP_ON_TIMEOUT) and the dump path (TORCH_FR_DUMP_TEMP_FILE, formerly
TORCH_NCCL_DEBUG_INFO_TEMP_FILE, plus the rank) is a writable folder with room for this
node's ranks. Defaults changed across torch releases (the buffer was off, then 2,000 entries),
so a setting left unset is reported as a risk, not as an error.
"""

from __future__ import annotations

import os
import shutil
from typing import Mapping

from ncclcheck.model import Category, CheckResult, passed, skipped, warned
from ncclcheck.probes.nccl.facts import NcclFacts
from ncclcheck.probes.spec import CheckSpec, judge

BUFFER_NAMES = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
DUMP_ON_TIMEOUT = "TORCH_NCCL_DUMP_ON_TIMEOUT"
PATH_NAMES = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_PATH = "/tmp/nccl_trace_rank_"
BYTES_PER_ENTRY = 2048     # an entry with its Python frames, pickled (measured: 1-2 KB)
RECOMMENDED_BUFFER = 2000
_OFF = {"0", "false", "no", "off", "n", "f"}

HANG_EVIDENCE = CheckSpec(
    "nccl.hang_evidence", "a hang would leave flight-recorder dumps to explain it",
    (Category.CONFIGURATION,),
    warns_when="in a multi-rank job: the flight-recorder buffer (TORCH_FR_BUFFER_SIZE / "
               "TORCH_NCCL_TRACE_BUFFER_SIZE) is unset, 0 or not a number; "
               "TORCH_NCCL_DUMP_ON_TIMEOUT is unset or off; or the dump path's folder "
               "(TORCH_FR_DUMP_TEMP_FILE / TORCH_NCCL_DEBUG_INFO_TEMP_FILE, default "
               "/tmp/nccl_trace_rank_) is missing, not writable or short of space for this "
               "node's ranks x buffer entries",
    doc="Skipped for a single process. `ncclcheck explain` reads the dumps of a hung job and "
        "names the rank that never arrived (docs/explain.md).",
    order=160)


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str] | None:
    for name in names:
        if env.get(name, "").strip():
            return name, env[name].strip()
    return None


def _int(text: str | None) -> int | None:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


@judge(HANG_EVIDENCE)
def judge_hang_evidence(facts: NcclFacts) -> CheckResult:
    return check_hang_evidence(facts.ctx.env)


def check_hang_evidence(env: Mapping[str, str]) -> CheckResult:
    world = _int(env.get("WORLD_SIZE"))
    if world is None or world <= 1:
        return skipped(HANG_EVIDENCE, "single process: no hang across ranks to record")
    local = _int(env.get("LOCAL_WORLD_SIZE")) or 1
    problems: list[str] = []
    fixes: list[str] = []
    buffer_setting = _first(env, BUFFER_NAMES)
    entries = _int(buffer_setting[1]) if buffer_setting else None
    if buffer_setting is None:
        problems.append("TORCH_FR_BUFFER_SIZE is unset (older torch records nothing by default)")
    elif entries is None or entries <= 0:
        problems.append(f"{buffer_setting[0]}={buffer_setting[1]}: the flight recorder is off")
    if problems:
        fixes.append(f"export TORCH_FR_BUFFER_SIZE={RECOMMENDED_BUFFER}")
    dump = env.get(DUMP_ON_TIMEOUT, "").strip()
    if not dump or dump.lower() in _OFF:
        problems.append(f"{DUMP_ON_TIMEOUT} is {'unset' if not dump else dump}: a timeout may "
                        "dump nothing")
        fixes.append(f"export {DUMP_ON_TIMEOUT}=1")
    path_setting = _first(env, PATH_NAMES)
    prefix = path_setting[1] if path_setting else DEFAULT_PATH
    folder = os.path.dirname(prefix) or "."
    need = local * (entries if entries and entries > 0 else RECOMMENDED_BUFFER) * BYTES_PER_ENTRY
    details = {"buffer_entries": entries, "dump_on_timeout": dump or None, "dump_prefix": prefix,
               "local_ranks": local, "bytes_needed": need}
    if not os.path.isdir(folder):
        problems.append(f"the dump folder {folder} does not exist")
        fixes.append(f"create {folder} on every node, or point TORCH_FR_DUMP_TEMP_FILE at a "
                     "shared folder")
    elif not os.access(folder, os.W_OK | os.X_OK):
        problems.append(f"the dump folder {folder} is not writable")
        fixes.append(f"make {folder} writable for the job's user")
    else:
        free = shutil.disk_usage(folder).free
        details["bytes_free"] = free
        if free < need:
            problems.append(f"{folder} has {free >> 20} MiB free, {local} rank(s) x buffer "
                            f"need about {need >> 20} MiB")
            fixes.append(f"free space in {folder} or dump elsewhere (TORCH_FR_DUMP_TEMP_FILE)")
    if problems:
        return warned(HANG_EVIDENCE, "a hang may leave no flight-recorder dump: "
                      + "; ".join(problems),
                      "; ".join(fixes) + ". Then `ncclcheck explain` on the job's logs and "
                      "dumps names the rank that never arrived.", Category.CONFIGURATION,
                      **details)
    return passed(HANG_EVIDENCE, f"flight recorder on ({entries} entries), dumps on timeout "
                  f"to {prefix}<rank> ({folder} writable, {details.get('bytes_free', 0) >> 20} "
                  "MiB free)", **details)
