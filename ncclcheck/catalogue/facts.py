"""The facts a matched line gives, and the texts they fill in.

A signature's patterns capture facts (named groups, typed as integers where they are); a
``requires`` condition compares two of them; ``derived_facts`` adds what follows from them (a
signal's name, a PCI bus id, a version string) so a text can name it; ``fill`` puts them into a
meaning or fix text, dropping an optional ``[[...]]`` part whose fact is unknown.
"""

from __future__ import annotations

import re
import signal as _signal
import string
from typing import Any, Mapping

from ncclcheck.ncclib.version import version_text

# Text between [[ and ]] is dropped when a fact it names is unknown, so one text reads well
# with or without the facts of a particular line.
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)
_FORMATTER = string.Formatter()


def counts(facts: Mapping[str, Any]) -> dict[str, int]:
    """``x_count`` for every fact ``x_list`` (a comma-separated list such as 0,1,3)."""
    return {name[:-5] + "_count": len(str(value).split(","))
            for name, value in facts.items() if name.endswith("_list")}


def derived_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Facts plus what follows from them (a signal's name, a PCI bus id, a version string)."""
    out = dict(facts)
    if isinstance(out.get("rank"), int) and "needed_world_size" not in out:
        out["needed_world_size"] = out["rank"] + 1
    sig = out.get("signal")
    if isinstance(sig, int) and "signal_name" not in out:
        out["signal_name"] = signal_name(sig)
    exitcode = out.get("exitcode")
    if isinstance(exitcode, int) and exitcode < 0 and "signal_name" not in out:
        out["signal"] = -exitcode
        out["signal_name"] = signal_name(-exitcode)
    if isinstance(exitcode, int) and exitcode > 128 and "signal_name" not in out:
        out["signal_name"] = signal_name(exitcode - 128)
    busid = out.get("busid")
    if busid is not None and "pci_bus_id" not in out:
        out["pci_bus_id"] = pci_bus_id(str(busid))
    for key in ("version1", "version2"):
        code = out.get(key)
        if isinstance(code, int) and f"{key}_text" not in out:
            out[f"{key}_text"] = version_text(code) or str(code)
    return out


def pci_bus_id(hex_text: str) -> str:
    """NCCL prints a GPU's PCI bus id as one hex integer (``1b000``); show it as 0000:1b:00.0."""
    digits = hex_text.lower().removeprefix("0x").rjust(9, "0")
    return f"{digits[:-5][-4:].rjust(4, '0')}:{digits[-5:-3]}:{digits[-3:-1]}.{digits[-1]}"


def signal_name(number: int) -> str:
    """SIGKILL for 9; 'signal N' for a number this platform does not name."""
    try:
        return _signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


CONDITION = re.compile(r"^\s*(\w+)\s*(<=|>=|==|!=|<|>)\s*(\w+)\s*$")
_COMPARE = {
    "<": lambda a, b: a < b, ">": lambda a, b: a > b, "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}


def holds(condition: str, facts: Mapping[str, Any]) -> bool:
    """A ``requires`` condition such as ``member > world_size`` on integer facts, or
    ``host != master_addr`` on two text facts (compared without regard to case)."""
    left, op, right = CONDITION.match(condition).groups()  # type: ignore[union-attr]
    values = [facts.get(t) if not t.lstrip("-").isdigit() else int(t) for t in (left, right)]
    if op in ("==", "!=") and all(isinstance(v, str) for v in values):
        return _COMPARE[op](values[0].casefold(), values[1].casefold())
    if not all(isinstance(v, int) for v in values):
        return False
    return _COMPARE[op](values[0], values[1])


def typed(value: str) -> Any:
    return int(value) if re.fullmatch(r"-?\d{1,18}", value) else value


def fill(template: str, facts: Mapping[str, Any]) -> str:
    def optional(part: re.Match[str]) -> str:
        names = [name for _, name, _, _ in _FORMATTER.parse(part.group(1)) if name]
        return part.group(1) if all(n in facts for n in names) else ""

    text = _OPTIONAL.sub(optional, template)
    try:
        return text.format_map(_Missing(facts))
    except (ValueError, IndexError):
        return text


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"
